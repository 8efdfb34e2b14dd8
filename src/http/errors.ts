/**
 * Every failure leaves in the documented body `{ code, message, details, hint }` (decisions D3).
 * Database errors caused by the caller's values keep PostgreSQL's code and message, as PostgREST
 * does; anything unexpected becomes a 500 that names no table, query or stack.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { type DatabaseError, isDatabaseError, StoreUnavailableError } from '../db/store.ts';
import { ApiError } from '../errors.ts';

/** Seconds a client is told to wait before retrying an answer that a retry may fix. */
export const RETRY_AFTER_SECONDS = '1';

const unavailable = () => new ApiError(503, 'DATABASE_UNAVAILABLE', 'The data store is unavailable; retry with backoff.', null, null, { 'retry-after': RETRY_AFTER_SECONDS });
const passThrough = (status: number) => (error: DatabaseError) => new ApiError(status, error.code, error.message, error.detail ?? null, error.hint ?? null);
/** Constraint messages name internal indexes, so they are replaced by plain words. */
const plainly = (status: number, code: string, message: string) => () => new ApiError(status, code, message);
/** The service's own fault: the generic 500, which names no table, query or stack. */
const internal = () => null;

/**
 * Every SQLSTATE answer, in the manner of PostgREST's Error.hs. A code is looked up whole, then by
 * its first three characters, then by its class (the first two); anything else is a 500.
 */
const SQLSTATE_ANSWERS: Record<string, (error: DatabaseError) => ApiError | null> = {
  // The store is unavailable: nothing in the request caused it, and a retry may succeed.
  '08': unavailable, //      connection exception: the connection failed, was refused or dropped
  '28': unavailable, //      invalid authorization: the service's login was refused
  '3D000': unavailable, //   invalid catalog name: the database is gone (dropped, being restored)
  '53': unavailable, //      insufficient resources: too many connections, out of memory or disk
  '55000': unavailable, //   object not in prerequisite state: ALLOW_CONNECTIONS false
  '57P': unavailable, //     operator intervention: shutdown, terminated backend, starting up
  '58': unavailable, //      system error: I/O error on the server
  '25006': unavailable, //   read-only transaction: a write reached a standby during a fail-over
  // The store cancelled a statement that ran past the statement timeout.
  '57014': () => new ApiError(503, 'QUERY_TIMEOUT', 'The query ran longer than the statement timeout and was cancelled.', null,
    'Narrow the filter, page with a smaller limit, or use keyset pagination.', { 'retry-after': RETRY_AFTER_SECONDS }),
  // The request raced another one; the same request will succeed when retried.
  '40001': () => new ApiError(503, 'CONCURRENT_WRITE', 'The request raced another; retry it.', null, null, { 'retry-after': RETRY_AFTER_SECONDS }),
  '40P01': () => new ApiError(503, 'CONCURRENT_WRITE', 'The request raced another; retry it.', null, null, { 'retry-after': RETRY_AFTER_SECONDS }),
  // Integrity constraints a sent value broke.
  '23505': plainly(409, 'CONFLICT', 'A record with the same key already exists.'),
  '23503': plainly(409, 'INVALID_REFERENCE', 'A referenced record does not exist.'),
  '23502': plainly(400, 'INVALID_BODY', 'A required value is missing.'),
  '23514': plainly(400, 'INVALID_BODY', 'A value is outside the allowed set.'),
  // Data exception: a sent value does not fit its column (bad number, date, regex...).
  '22': passThrough(400),
  // No operator fits the column's type, e.g. `like` on a uuid: PostgREST answers 404.
  '42883': passThrough(404),
  // Insufficient privilege: the service's roles or grants are wrong, not the request.
  '42501': internal,
  // Syntax error or access rule violation from the request's text, e.g. an `fts` query that is
  // not valid tsquery syntax (42601): PostgREST answers class 42 with 400.
  '42': passThrough(400),
};

export function databaseErrorToApiError(error: unknown): ApiError | null {
  if (error instanceof StoreUnavailableError) return unavailable();
  if (!isDatabaseError(error)) return null;
  const answer = SQLSTATE_ANSWERS[error.code] ?? SQLSTATE_ANSWERS[error.code.slice(0, 3)] ?? SQLSTATE_ANSWERS[error.code.slice(0, 2)];
  return answer ? answer(error) : null;
}

function fastifyErrorToApiError(error: FastifyError): ApiError | null {
  if (error.validation) {
    return error.validationContext === 'body'
      ? new ApiError(400, 'INVALID_BODY', `The request body is invalid: ${error.message}.`)
      : new ApiError(400, 'INVALID_PARAMETER', `The request is invalid: ${error.message}.`);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON with Content-Type: application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'PAYLOAD_TOO_LARGE', 'The request body is larger than the service accepts.', null, 'Send at most 500 rows per request.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'INVALID_BODY', 'The request body is empty; send a JSON document.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(400, 'INVALID_BODY', 'The request body does not match its Content-Length.');
  }
  if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new ApiError(400, 'INVALID_BODY', `The request body is not valid JSON: ${error.message}`);
  }
  return null;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const apiError = error instanceof ApiError ? error : fastifyErrorToApiError(error) ?? databaseErrorToApiError(error);
    if (!apiError) {
      request.log.error({ err: error }, 'unexpected error');
      return reply.code(500).type('application/json; charset=utf-8').send({
        code: 'INTERNAL', message: 'The service failed to handle the request; retry with backoff.',
        details: null, hint: `Quote request id ${request.id} when contacting support.`,
      });
    }
    if (apiError.status >= 500) request.log.warn({ err: error }, apiError.code);
    return reply.code(apiError.status).headers(apiError.headers).type('application/json; charset=utf-8').send(apiError.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).type('application/json; charset=utf-8').send(
      new ApiError(404, 'NOT_FOUND', `No endpoint at ${request.method} ${request.url.split('?')[0]}.`).toBody());
  });
}
