/**
 * App assembly: each concern is its own plugin. The partner API under /v1 (bearer tokens, rate
 * limits, reads, writes), the operator API under /admin/v1, health, and the OpenAPI description.
 */
import { METHODS } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { CONFIG_DEFAULTS, type Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { pendingMigrations } from '../db/migrate.ts';
import { StoreUnavailableError } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { TokenAuthenticator } from '../domain/tokens.ts';
import { adminRoutes } from './admin-routes.ts';
import { authenticatePartner } from './auth.ts';
import { MAX_HEADER_BYTES, edgeOptions, installEdgeHooks } from './edge.ts';
import { installErrorHandling } from './errors.ts';
import { registerOpenApi } from './openapi.ts';
import { registerRateLimits } from './rate-limits.ts';
import { registerReadRoutes } from './read-routes.ts';
import { registerWriteRoutes } from './write-routes.ts';

/** Bodies above this are refused with 413 PAYLOAD_TOO_LARGE before they are parsed. */
export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * Node checks the request and headers timeouts at this interval (its default, 30 s, would let
 * a slow client hold a socket up to 30 s past its timeout).
 */
const CONNECTION_CHECK_INTERVAL_MS = 1_000;

type EdgeSettings = Pick<Config, 'authFailureLimitPerMin' | 'requestTimeoutMs' | 'headersTimeoutMs' | 'idleTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'>;

export type AppSettings = Pick<Config, 'adminKey' | 'redisUrl' | 'readLimitPerMin' | 'writeLimitPerMin' | 'logLevel'>
  & Partial<EdgeSettings & Pick<Config, 'readyTimeoutMs' | 'plannedCounts'>> & {
  /** Where JSON log lines go; standard output when absent. */
  logStream?: { write(line: string): void };
};

const TIMED_OUT = Symbol('timed out');

function withinMs<T>(ms: number, work: Promise<T>): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export async function buildApp(appSettings: AppSettings, db: Database): Promise<FastifyInstance> {
  const settings = { ...CONFIG_DEFAULTS, ...appSettings };
  const app = Fastify({
    logger: {
      level: settings.logLevel,
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      ...(settings.logStream ? { stream: settings.logStream } : {}),
    },
    bodyLimit: BODY_LIMIT_BYTES,
    http: {
      // Room above the query-string cap (16 KiB), so that it is the service's 414 that answers.
      maxHeaderSize: MAX_HEADER_BYTES,
      headersTimeout: settings.headersTimeoutMs,
      connectionsCheckingInterval: CONNECTION_CHECK_INTERVAL_MS,
      // A missing Host is answered by the service, with its error body.
      requireHostHeader: false,
    },
    requestTimeout: settings.requestTimeoutMs,
    connectionTimeout: settings.idleTimeoutMs,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
    requestIdHeader: false,
    ...edgeOptions,
    return503OnClosing: false,
  });
  app.server.maxConnections = settings.maxConnections;
  // Every method Node parses reaches the router, so a resource answers 405 to the ones it lacks.
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
  }
  installErrorHandling(app);
  installEdgeHooks(app);
  await registerOpenApi(app);

  // Liveness: the process answers. It never touches the store, so a store outage does not get
  // healthy instances restarted.
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  // Readiness: the store answers within the ready timeout and its schema is migrated.
  const { readyTimeoutMs } = settings;
  app.get('/readyz', { schema: { hide: true } }, async () => {
    const pending = await withinMs(readyTimeoutMs, pendingMigrations(db.store));
    if (pending === TIMED_OUT) throw new StoreUnavailableError('READY_TIMEOUT', `The data store did not answer within ${readyTimeoutMs} ms.`);
    if (pending.length > 0) {
      throw apiError('NOT_READY', pending.length);
    }
    return { status: 'ready' };
  });

  const tokens = new TokenAuthenticator(db);
  const limits = await registerRateLimits(app, settings);
  await app.register(async (v1) => {
    v1.addHook('onRequest', authenticatePartner(tokens, limits.authFailures));
    registerReadRoutes(v1, { db, limits, plannedCounts: settings.plannedCounts });
    registerWriteRoutes(v1, { db, limits });
  });
  await app.register(adminRoutes, { prefix: '/admin/v1', db, tokens, authFailures: limits.authFailures, adminKey: settings.adminKey });
  return app;
}
