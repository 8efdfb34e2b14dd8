/**
 * Every failure leaves in the documented body `{ code, message, details, hint }` (decisions D3).
 * Database errors caused by the caller's values keep PostgreSQL's code and message, as PostgREST
 * does; anything unexpected becomes a 500 that names no table, query or stack.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import { type DatabaseError, StoreBusyError, isDatabaseError, violatedConstraint } from '../db/store.ts';
import { ApiError } from '../errors.ts';

const CONNECTION_FAILURES = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE']);

const unavailable = () => new ApiError(503, 'DATABASE_UNAVAILABLE', 'The data store is unavailable; retry with backoff.', null, null, { 'retry-after': '1' });

/** Constraint messages name internal indexes, so they are replaced by plain words. */
const CONSTRAINT_MESSAGES: Record<string, [number, string, string]> = {
  '23505': [409, 'CONFLICT', 'A record with the same key already exists.'],
  '23503': [409, 'INVALID_REFERENCE', 'A referenced record does not exist.'],
  '23502': [400, 'INVALID_BODY', 'A required value is missing.'],
  '23514': [400, 'INVALID_BODY', 'A value is outside the allowed set.'],
};

/**
 * The request field a key violation is about, with the value sent for it. The column comes from
 * the constraint's name by PostgreSQL's convention, `<table>_<column>_fkey` or `_key`: the
 * error's own detail omits the key on tables under row-level security.
 */
function violatedField(error: DatabaseError, body: unknown): { field: string; value: string } | null {
  const violated = violatedConstraint(error);
  if (!violated || body === null || typeof body !== 'object') return null;
  const { table, constraint } = violated;
  const suffix = ['_fkey', '_key'].find((s) => constraint.endsWith(s));
  if (!suffix || !constraint.startsWith(`${table}_`)) return null;
  const field = constraint.slice(table.length + 1, -suffix.length);
  const value = (body as Record<string, unknown>)[field];
  return typeof value === 'string' ? { field, value } : null;
}

const KEY_VIOLATION_MESSAGES: Record<string, (field: string, value: string) => string> = {
  '23505': (field, value) => `A record with ${field} "${value}" already exists.`,
  '23503': (field, value) => `${field} ${value} does not exist.`,
};

function databaseErrorToApiError(error: unknown, body: unknown): ApiError | null {
  if (error instanceof StoreBusyError) {
    return new ApiError(503, 'DATABASE_BUSY', 'The data store is busy with other requests; retry with backoff.',
      `No turn on the embedded store within ${error.waitedMs} ms.`, null, { 'retry-after': '1' });
  }
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string' && CONNECTION_FAILURES.has(code)) return unavailable();
  if (!isDatabaseError(error)) return null;
  const passThrough = (status: number) => new ApiError(status, error.code, error.message, error.detail ?? null, error.hint ?? null);
  if (CONSTRAINT_MESSAGES[error.code]) {
    const [status, apiCode, message] = CONSTRAINT_MESSAGES[error.code];
    const violated = KEY_VIOLATION_MESSAGES[error.code] ? violatedField(error, body) : null;
    return new ApiError(status, apiCode, violated ? KEY_VIOLATION_MESSAGES[error.code](violated.field, violated.value) : message);
  }
  if (error.code.startsWith('22')) return passThrough(400);
  // PostgREST answers 404 when no operator fits the column's type, e.g. `like` on a uuid.
  if (error.code === '42883') return passThrough(404);
  if (['42804', '42725', '42846', '42P18', '42704'].includes(error.code)) return passThrough(400);
  if (error.code === '57014') {
    return new ApiError(503, 'QUERY_TIMEOUT', 'The query ran longer than the statement timeout and was cancelled.', null,
      'Narrow the filter, page with a smaller limit, or use keyset pagination.', { 'retry-after': '1' });
  }
  if (error.code.startsWith('08') || error.code.startsWith('57P') || error.code.startsWith('53')) return unavailable();
  if (error.code === '40001' || error.code === '40P01') {
    return new ApiError(503, 'CONCURRENT_WRITE', 'The request raced another; retry it.', null, null, { 'retry-after': '1' });
  }
  return null;
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
    const apiError = error instanceof ApiError ? error : fastifyErrorToApiError(error) ?? databaseErrorToApiError(error, request.body);
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
