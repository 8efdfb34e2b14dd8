/**
 * Prometheus metrics at GET /metrics (text exposition format, through prom-client): requests and
 * their durations by route template, batch rows by outcome and row code, rate-limit rejections,
 * the store's pool and failures, and the process. Each app has a registry of its own, so several
 * apps in one process (tests) count apart. Label values are route templates, methods, statuses
 * and the service's own codes: never a URL, a query value or anything a caller typed freely.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '../db/store.ts';
import { WRITABLE_RESOURCES } from '../resources/write-shapes.ts';
import { ROW_STATUSES } from '../writes/batch.ts';
import { ROW_CODES } from '../writes/row-codes.ts';
import { requireStaticKey } from './auth.ts';
import type { AuthFailureGuard } from './rate-limits.ts';
import { RATE_LIMIT_KINDS, notesOf, routeTemplate } from './request-notes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's own metrics registry, served by `metricsEndpoint`. */
    metricsRegistry: Registry;
  }
}

const PREFIX = 'pds_';

function storeGauge(registry: Registry, store: Store, name: string, help: string, read: (stats: ReturnType<Store['poolStats']>) => number) {
  return new Gauge({
    name, help, registers: [registry],
    collect() {
      this.set(read(store.poolStats()));
    },
  });
}

/** Creates the registry and counts every request once it is answered (src/http/answered.ts). */
export const metrics = fp(async (app: FastifyInstance, options: { store: Store }) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
  const registers = [registry];

  const requests = new Counter({
    name: `${PREFIX}http_requests_total`, help: 'HTTP requests answered, by route template, method and status.',
    labelNames: ['route', 'method', 'status'], registers,
  });
  const durations = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`, help: 'Time from a request\'s arrival to its answer, by route template and method.',
    labelNames: ['route', 'method'], registers,
  });
  const batchRows = new Counter({
    name: `${PREFIX}batch_rows_total`, help: 'Rows of write batches, by resource and outcome.',
    labelNames: ['resource', 'outcome'], registers,
  });
  const rejectedRows = new Counter({
    name: `${PREFIX}batch_rejected_rows_total`, help: 'Rejected rows of write batches, by resource and row code.',
    labelNames: ['resource', 'code'], registers,
  });
  const rateLimitRejections = new Counter({
    name: `${PREFIX}rate_limit_rejections_total`, help: `Requests refused 429, by the limit that refused them (${RATE_LIMIT_KINDS.join(', ')}).`,
    labelNames: ['kind'], registers,
  });
  const storeErrors = new Counter({
    name: `${PREFIX}store_errors_total`,
    help: 'Store failures that answered a request, by SQLSTATE class (two characters), or unavailable (connection lost, timed out, no free connection) or busy (PGlite\'s session).',
    labelNames: ['class'], registers,
  });
  storeGauge(registry, options.store, `${PREFIX}store_pool_in_use`, 'Store connections held by requests (PGlite: its one session, 0 or 1).', (s) => s.inUse);
  storeGauge(registry, options.store, `${PREFIX}store_pool_waiting`, 'Requests waiting for a store connection.', (s) => s.waiting);
  storeGauge(registry, options.store, `${PREFIX}store_pool_shared`, 'Partner reads sent behind another read of their scope on a connection it holds, every connection being in use.', (s) => s.shared);

  // Every known series starts at zero, so a rate over the first increment is not lost.
  for (const resource of WRITABLE_RESOURCES) {
    for (const outcome of ROW_STATUSES) batchRows.inc({ resource, outcome }, 0);
    for (const code of Object.keys(ROW_CODES[resource])) rejectedRows.inc({ resource, code }, 0);
  }
  for (const kind of RATE_LIMIT_KINDS) rateLimitRejections.inc({ kind }, 0);

  app.onAnswered((request, reply) => {
    const route = routeTemplate(request);
    requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    durations.observe({ route, method: request.method }, reply.elapsedTime / 1000);
    const { batch, rateLimited, storeErrorClass } = notesOf(request);
    if (batch) {
      for (const [outcome, rows] of Object.entries(batch.counts)) batchRows.inc({ resource: batch.resource, outcome }, rows);
      for (const [code, rows] of Object.entries(batch.rejections)) rejectedRows.inc({ resource: batch.resource, code }, rows);
    }
    if (rateLimited) rateLimitRejections.inc({ kind: rateLimited });
    if (storeErrorClass) storeErrors.inc({ class: storeErrorClass });
  });
  app.decorate('metricsRegistry', registry);
}, { name: 'metrics', dependencies: ['answers'] });

/** With a key, GET /metrics answers only `Authorization: Bearer <key>`; without one it is open. */
function metricsKeyCheck(options: { metricsKey?: string; authFailures: AuthFailureGuard }) {
  return options.metricsKey === undefined ? [] : [requireStaticKey(options.metricsKey, options.authFailures, 'metrics')];
}

/** GET /metrics at the root, outside the OpenAPI description: it is the operator's, not the partners'. */
export const metricsEndpoint = fp(async (app: FastifyInstance, options: { metricsKey?: string; authFailures: AuthFailureGuard }) => {
  const registry = app.metricsRegistry;
  app.get('/metrics', { onRequest: metricsKeyCheck(options) }, async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()));
}, { name: 'metrics-endpoint', dependencies: ['metrics', 'rate-limits'] });
