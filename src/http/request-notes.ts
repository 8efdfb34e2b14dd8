/**
 * What handling a request found out that its access-log line (src/http/access-log.ts) and the
 * metrics (src/http/metrics.ts) report once it is answered: the error code, the batch's
 * outcomes, the rate limit that refused it, the class of a store failure. Routes and hooks write
 * a note where they learn the fact; nothing here carries a value the caller sent.
 */
import type { FastifyRequest } from 'fastify';
import type { RowStatus } from '../writes/batch.ts';
import type { WritableResource } from '../resources/write-shapes.ts';

/** The limits that answer 429 (src/http/rate-limits.ts). */
export const RATE_LIMIT_KINDS = ['read', 'write', 'auth_failure'] as const;
export type RateLimitKind = (typeof RATE_LIMIT_KINDS)[number];

export interface BatchNote {
  readonly resource: WritableResource;
  readonly counts: Readonly<Record<RowStatus, number>>;
  /** Rejected rows by row code (src/writes/row-codes.ts). */
  readonly rejections: Readonly<Record<string, number>>;
}

export interface RequestNotes {
  /** The `code` of the error body the request was answered with. */
  errorCode?: string;
  batch?: BatchNote;
  /** The answer was the stored answer of an earlier write with the same Idempotency-Key. */
  idempotentReplay?: boolean;
  rateLimited?: RateLimitKind;
  /** The SQLSTATE class (or `unavailable`, `busy`) of the store failure that answered it. */
  storeErrorClass?: string;
}

/** The label and log value of a request no route matched (404). */
const UNMATCHED_ROUTE = 'unmatched';

/** The route's template (`/v1/students`), never the URL the caller sent. */
export function routeTemplate(request: FastifyRequest): string {
  // A request no route of its method took (a 405 at the root), or the method fallback took
  // (src/http/methods.ts), whatever it was answered (405, 401, 406), is named by the template of
  // the path it came for, when any method routes that path.
  const unserved = request.routeOptions.url === undefined || request.routeOptions.config.methodFallback === true;
  return (unserved ? request.server.routedMethods.of(request.url).template : null) ?? request.routeOptions.url ?? UNMATCHED_ROUTE;
}

// Keyed by the request object, so a note can be written from any hook, even one that runs
// before a decoration's initialiser would (an error in the first onRequest hook).
const notes = new WeakMap<FastifyRequest, RequestNotes>();

export function notesOf(request: FastifyRequest): RequestNotes {
  let found = notes.get(request);
  if (!found) {
    found = {};
    notes.set(request, found);
  }
  return found;
}

export function noteBatch(
  request: FastifyRequest,
  resource: WritableResource,
  result: { counts: Record<RowStatus, number>; results: readonly { status: RowStatus; code?: string }[] },
): void {
  const rejections: Record<string, number> = {};
  for (const row of result.results) {
    if (row.status === 'rejected' && row.code) rejections[row.code] = (rejections[row.code] ?? 0) + 1;
  }
  notesOf(request).batch = { resource, counts: result.counts, rejections };
}
