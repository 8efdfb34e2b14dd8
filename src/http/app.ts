/**
 * App assembly: each concern is its own plugin. The partner API under /v1 (bearer tokens, rate
 * limits, reads, writes), the operator API under /admin/v1, health, and the OpenAPI description.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { TokenAuthenticator } from '../domain/tokens.ts';
import { adminRoutes } from './admin-routes.ts';
import { authenticatePartner } from './auth.ts';
import { installErrorHandling } from './errors.ts';
import { registerOpenApi } from './openapi.ts';
import { registerRateLimits } from './rate-limits.ts';
import { registerReadRoutes } from './read-routes.ts';
import { registerWriteRoutes } from './write-routes.ts';

/** Bodies above this are refused with 413 PAYLOAD_TOO_LARGE before they are parsed. */
export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

export type AppSettings = Pick<Config, 'adminKey' | 'redisUrl' | 'readLimitPerMin' | 'writeLimitPerMin' | 'plannedCounts' | 'logLevel'> & {
  /** Where JSON log lines go; standard output when absent. */
  logStream?: { write(line: string): void };
};

export async function buildApp(settings: AppSettings, db: Database): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: settings.logLevel,
      redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
      ...(settings.logStream ? { stream: settings.logStream } : {}),
    },
    bodyLimit: BODY_LIMIT_BYTES,
    // Room above the query-string cap (16 KiB), so that it is the service's 414 that answers.
    http: { maxHeaderSize: 64 * 1024 },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    return503OnClosing: true,
  });
  installErrorHandling(app);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  await registerOpenApi(app);

  app.get('/healthz', { schema: { hide: true } }, async () => {
    await db.store.query('select 1');
    return { status: 'ok' };
  });

  const tokens = new TokenAuthenticator(db);
  const limits = await registerRateLimits(app, settings);
  await app.register(async (v1) => {
    v1.addHook('onRequest', authenticatePartner(tokens));
    registerReadRoutes(v1, { db, limits, plannedCounts: settings.plannedCounts });
    registerWriteRoutes(v1, { db, limits });
  });
  await app.register(adminRoutes, { prefix: '/admin/v1', db, tokens, adminKey: settings.adminKey });
  return app;
}
