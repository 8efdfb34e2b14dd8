/**
 * App assembly: each concern is its own plugin. The partner API under /v1 (CORS, bearer tokens,
 * rate limits, reads, writes, the change feed), the operator API under /admin/v1, health, metrics, the OpenAPI
 * description and the reference page that renders it.
 */
import { METHODS, type Server } from 'node:http';
import Fastify, { type FastifyHttpOptions, type FastifyInstance, LogController } from 'fastify';
import { CONFIG_DEFAULTS, type Config } from '../config.ts';
import { LIMITS } from '../limits.ts';
import type { Database } from '../db/database.ts';
import { TokenAuthenticator } from '../domain/tokens.ts';
import { operatorApi } from './admin/index.ts';
import { partnerAuth } from './auth.ts';
import { corsPolicy } from './cors.ts';
import { edge, edgeOptions } from './edge.ts';
import { accessLog } from './access-log.ts';
import { answers } from './answered.ts';
import { registerChangeRoutes } from './change-routes.ts';
import { errorHandling } from './errors.ts';
import { health } from './health.ts';
import { inFlightLimit } from './in-flight.ts';
import { jsonBodies } from './json-bodies.ts';
import { meRoute } from './me.ts';
import { WRITING_METHODS, methodFallback, methodRouting } from './methods.ts';
import { metrics, metricsEndpoint } from './metrics.ts';
import { openApi, openApiDocument } from './openapi/document.ts';
import { OPENAPI_PATH, OPERATOR_PREFIX, PARTNER_PREFIX } from './prefixes.ts';
import { type RateLimitHooks, rateLimits } from './rate-limits.ts';
import { referencePage } from './reference-page.ts';
import { invalidResourcePath, registerReadRoutes, unknownFunction, unknownResource } from './read-routes.ts';
import { schemaProfiles } from './schema-profiles.ts';
import { requestValidator } from './validation.ts';
import { registerWriteRoutes } from './write-routes.ts';

/**
 * Node checks the request and headers timeouts at this interval (its default, 30 s, would let
 * a slow client hold a socket up to 30 s past its timeout).
 */
const CONNECTION_CHECK_INTERVAL_MS = 1_000;

type EdgeSettings = Pick<Config, 'authFailureLimitPerMin' | 'requestTimeoutMs' | 'headersTimeoutMs' | 'idleTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'>;

export type AppSettings = Pick<Config, 'adminKey' | 'redisUrl' | 'readLimitPerMin' | 'writeLimitPerMin' | 'logLevel'>
  & Partial<EdgeSettings & Pick<Config, 'readyTimeoutMs' | 'plannedCounts' | 'metricsKey' | 'trustProxy' | 'corsOrigins'>> & {
  /** Where JSON log lines go; standard output when absent. */
  logStream?: { write(line: string): void };
};

type ServerSettings = Pick<Config, 'logLevel' | 'requestTimeoutMs' | 'headersTimeoutMs' | 'idleTimeoutMs' | 'keepAliveTimeoutMs' | 'trustProxy'>
  & Pick<AppSettings, 'logStream'>;

function serverOptions(settings: ServerSettings): FastifyHttpOptions<Server> {
  return {
    logger: {
      level: settings.logLevel,
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      ...(settings.logStream ? { stream: settings.logStream } : {}),
    },
    bodyLimit: LIMITS.bodyBytes,
    http: {
      maxHeaderSize: LIMITS.headerBytes,
      headersTimeout: settings.headersTimeoutMs,
      connectionsCheckingInterval: CONNECTION_CHECK_INTERVAL_MS,
      // A missing Host is answered by the service, with its error body.
      requireHostHeader: false,
    },
    requestTimeout: settings.requestTimeoutMs,
    connectionTimeout: settings.idleTimeoutMs,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
    requestIdHeader: false,
    // Only the named balancers' X-Forwarded-For is believed; a client cannot pick its own address.
    ...(settings.trustProxy ? { trustProxy: settings.trustProxy } : {}),
    // src/http/access-log.ts writes one line per request instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    ...edgeOptions,
    return503OnClosing: false,
  };
}

/** Every method Node parses reaches the router, so a resource answers 405 to the ones it lacks. */
function routeEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
  }
}

export async function buildApp(appSettings: AppSettings, db: Database): Promise<FastifyInstance> {
  const settings = { ...CONFIG_DEFAULTS, ...appSettings };
  const app = Fastify(serverOptions(settings));
  app.server.maxConnections = settings.maxConnections;
  app.setValidatorCompiler(requestValidator());
  routeEveryMethod(app);
  // Before any route (@fastify/cors's included), which takes the error handler set when it is added.
  await app.register(errorHandling);
  await app.register(jsonBodies);
  // First, so that their hooks reach every route and the 404 handler.
  await app.register(answers);
  await app.register(metrics, { store: db.store });
  await app.register(accessLog);
  // Before the routes' own hooks, so that every answer below it carries the CORS headers.
  await app.register(corsPolicy, { origins: settings.corsOrigins });
  await app.register(edge);
  // Before any route, so that it learns every route's methods.
  await app.register(methodRouting);
  await app.register(openApi);
  await app.register(health, { db, readyTimeoutMs: settings.readyTimeoutMs });
  await app.register(referencePage, { descriptionUrl: `${PARTNER_PREFIX}${OPENAPI_PATH}` });
  const { readLimitPerMin, writeLimitPerMin, authFailureLimitPerMin, redisUrl } = settings;
  await app.register(rateLimits, { readLimitPerMin, writeLimitPerMin, authFailureLimitPerMin, redisUrl });
  await app.register(metricsEndpoint, { metricsKey: settings.metricsKey, authFailures: app.rateLimits.authFailures });

  const tokens = new TokenAuthenticator(db, { log: app.log });
  const limits = app.rateLimits;
  await app.register(async (v1) => {
    await v1.register(openApiDocument);
    await v1.register(partnerApi, { db, tokens, limits, plannedCounts: settings.plannedCounts, readLimitPerMin, writeLimitPerMin });
  }, { prefix: PARTNER_PREFIX });
  await app.register(operatorApi, { prefix: OPERATOR_PREFIX, db, tokens, authFailures: limits.authFailures, adminKey: settings.adminKey });
  return app;
}

/** Reads, writes and the token's own description, behind bearer tokens; the OpenAPI document beside them needs none. */
async function partnerApi(
  app: FastifyInstance,
  options: { db: Database; tokens: TokenAuthenticator; limits: RateLimitHooks; plannedCounts: boolean } & Pick<Config, 'readLimitPerMin' | 'writeLimitPerMin'>,
): Promise<void> {
  const { db, tokens, limits, plannedCounts } = options;
  await app.register(partnerAuth, { tokens, authFailures: limits.authFailures });
  // Every request with a valid token counts, right after the token check and before anything can
  // refuse it, so that every answer carries the headers of the limit that counted it: a method
  // that writes against the token's write limit, any other against the source IP's read limit.
  app.addHook('onRequest', (request, reply) => (WRITING_METHODS.has(request.method) ? limits.write : limits.read)(request, reply));
  app.addHook('onRequest', inFlightLimit());
  await app.register(schemaProfiles);
  // A method a /v1 path does not serve, a name no resource has, a path below a resource's and a function call,
  // after the token check: whatever body and Content-Type came (postgrest-js sends
  // `Content-Type: application/json` and no body with every delete), the answer is 405, or 404
  // PGRST205, PGRST125 or PGRST202 as PostgREST answers, the body unread.
  await app.register(methodFallback, {
    fallbacks: [
      { url: '/:resource', notFound: unknownResource },
      { url: '/:resource/*', notFound: invalidResourcePath },
      { url: '/rpc/:name', notFound: unknownFunction },
    ],
  });
  await app.register(meRoute, { db, readLimitPerMin: options.readLimitPerMin, writeLimitPerMin: options.writeLimitPerMin });
  await app.register(registerReadRoutes, { db, plannedCounts });
  await app.register(registerWriteRoutes, { db });
  await app.register(registerChangeRoutes, { db });
}
