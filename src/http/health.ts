/**
 * Liveness and readiness for the orchestrator: GET /healthz and GET /readyz, at the root and
 * without a token (documented in src/http/openapi/operations.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.ts';
import { pendingMigrations } from '../db/migrate.ts';
import { StoreUnavailableError } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { HEALTH_PATHS } from './prefixes.ts';

const TIMED_OUT = Symbol('timed out');

function withinMs<T>(ms: number, work: Promise<T>): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export async function health(app: FastifyInstance, options: { db: Database; readyTimeoutMs: number }): Promise<void> {
  const { db, readyTimeoutMs } = options;

  // Liveness: the process answers. It never touches the store, so a store outage does not get
  // healthy instances restarted.
  app.get(HEALTH_PATHS.live, async () => ({ status: 'ok' }));

  // Readiness: the store answers within the ready timeout and its schema is migrated.
  app.get(HEALTH_PATHS.ready, async () => {
    const pending = await withinMs(readyTimeoutMs, pendingMigrations(db.store));
    if (pending === TIMED_OUT) throw new StoreUnavailableError('READY_TIMEOUT', `The data store did not answer within ${readyTimeoutMs} ms.`);
    if (pending.length > 0) {
      throw apiError('NOT_READY', pending.length);
    }
    return { status: 'ready' };
  });
}
