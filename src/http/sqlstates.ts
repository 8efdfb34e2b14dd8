/**
 * What a failure of the store answers, in the manner of PostgREST's Error.hs: one table from
 * SQLSTATE to the caller's answer. A code is looked up whole, then by its first three characters,
 * then by its class (the first two); a code the table does not name is the service's own fault,
 * the generic 500. Values the caller sent keep PostgreSQL's code and message, as PostgREST does;
 * constraint messages name internal indexes, so they are replaced by plain words. Codes are
 * named as pg-error-enum names them; a class (two or three characters) as PostgreSQL's docs do.
 */
import { PostgresError } from 'pg-error-enum';
import {
  type DatabaseError, StoreBusyError, StoreUnavailableError, isDatabaseError, violatedConstraint,
} from '../db/store.ts';
import { LOST_RACE_SQLSTATES } from '../db/savepoint.ts';
import { ApiError, apiError } from '../errors.ts';

type Answer = (error: DatabaseError, body: unknown) => ApiError | null;

const unavailable: Answer = () => apiError('DATABASE_UNAVAILABLE');
/** The answers that keep PostgreSQL's own code, with their statuses: the OpenAPI description lists those codes. */
const passThroughStatuses = new Map<Answer, number>();
const passThrough = (status: number): Answer => {
  const answer: Answer = (error) => new ApiError(status, error.code, error.message, error.detail ?? null, error.hint ?? null);
  passThroughStatuses.set(answer, status);
  return answer;
};
const serviceFault: Answer = () => null;

/**
 * The request field a key violation is about, with the value sent for it. The column comes from
 * the constraint's name by PostgreSQL's convention, `<table>_<column>_fkey` or `_key`: the
 * error's own detail omits the key on tables under row-level security.
 */
function violatedField(error: DatabaseError, body: unknown): [field: string, value: string] | [] {
  const constraint = violatedConstraint(error);
  if (!constraint || body === null || typeof body !== 'object') return [];
  const suffix = ['_fkey', '_key'].find((s) => constraint.endsWith(s));
  if (!suffix) return [];
  // Constraints are named `<table>_<field>_key` or `_fkey` (src/db/migrations): the longest of the
  // body's fields the name ends with (`short_name` over `name`).
  const [field] = Object.keys(body).filter((key) => constraint.endsWith(`_${key}${suffix}`)).sort((a, b) => b.length - a.length);
  const value = field === undefined ? undefined : (body as Record<string, unknown>)[field];
  return typeof value === 'string' ? [field, value] : [];
}

const SQLSTATE_ANSWERS: Readonly<Record<string, Answer>> = {
  // The store is unavailable: nothing in the request caused it, and a retry may succeed.
  '08': unavailable, // connection exception: the connection failed, was refused or dropped
  '28': unavailable, // invalid authorization: the service's login was refused
  [PostgresError.INVALID_CATALOG_NAME]: unavailable, // the database is gone (dropped, being restored)
  '53': unavailable, // insufficient resources: too many connections, out of memory or disk
  [PostgresError.OBJECT_NOT_IN_PREREQUISITE_STATE]: unavailable, // ALLOW_CONNECTIONS false
  '57P': unavailable, // operator intervention: shutdown, terminated backend, starting up
  '58': unavailable, // system error: I/O error on the server
  [PostgresError.READ_ONLY_SQL_TRANSACTION]: unavailable, // a write reached a standby during a fail-over
  // The store cancelled a statement that ran past the statement timeout.
  [PostgresError.QUERY_CANCELED]: () => apiError('QUERY_TIMEOUT'),
  // The request raced another one (serialization failure, deadlock); the same request will succeed when retried.
  ...Object.fromEntries([...LOST_RACE_SQLSTATES].map((code) => [code, () => apiError('CONCURRENT_WRITE')])),
  // Integrity constraints a sent value broke.
  [PostgresError.UNIQUE_VIOLATION]: (error, body) => apiError('CONFLICT', ...violatedField(error, body)),
  [PostgresError.FOREIGN_KEY_VIOLATION]: (error, body) => apiError('INVALID_REFERENCE', ...violatedField(error, body)),
  [PostgresError.NOT_NULL_VIOLATION]: () => apiError('INVALID_BODY', 'A required value is missing.'),
  [PostgresError.CHECK_VIOLATION]: () => apiError('INVALID_BODY', 'A value is outside the allowed set.'),
  // Data exception: a sent value does not fit its column (bad number, date, regex...).
  '22': passThrough(400),
  // No operator fits the column's type, e.g. `like` on a uuid: PostgREST answers 404.
  [PostgresError.UNDEFINED_FUNCTION]: passThrough(404),
  // Insufficient privilege: the service's roles or grants are wrong, not the request.
  [PostgresError.INSUFFICIENT_PRIVILEGE]: serviceFault,
  // Program limit exceeded by a sent value: an array literal of more than six dimensions or with
  // a bound past 2^31. PostgREST answers 500; the same request fails every time, so a retry with
  // backoff, which a 5xx asks for, cannot help. The rest of class 54 stays the service's fault.
  [PostgresError.PROGRAM_LIMIT_EXCEEDED]: passThrough(400),
  // Syntax error or access rule violation from the request's text, e.g. an `fts` query that is
  // not valid tsquery syntax (42601): PostgREST answers class 42 with 400.
  '42': passThrough(400),
};

/**
 * The class a store failure is counted under in the metrics: the SQLSTATE class (its first two
 * characters) for an error PostgreSQL raised, `unavailable` or `busy` for the store's own; null
 * for an error that is not the store's.
 */
export function storeErrorClass(error: unknown): string | null {
  if (error instanceof StoreBusyError) return 'busy';
  if (error instanceof StoreUnavailableError) return 'unavailable';
  return isDatabaseError(error) ? error.code.slice(0, 2) : null;
}

const answerFor = (code: string): Answer | undefined =>
  SQLSTATE_ANSWERS[code] ?? SQLSTATE_ANSWERS[code.slice(0, 3)] ?? SQLSTATE_ANSWERS[code.slice(0, 2)];

/** The status a failure with this SQLSTATE reaches the caller with under PostgreSQL's own code, if it does. */
export function passThroughStatus(code: string): number | undefined {
  const answer = answerFor(code);
  return answer === undefined ? undefined : passThroughStatuses.get(answer);
}

/** The answer to a failure of the store, or null when it is the service's own fault (a 500). */
export function databaseErrorToApiError(error: unknown, body: unknown = null): ApiError | null {
  if (error instanceof StoreBusyError) return apiError('DATABASE_BUSY', { waitedMs: error.waitedMs });
  if (error instanceof StoreUnavailableError) return apiError('DATABASE_UNAVAILABLE');
  if (!isDatabaseError(error)) return null;
  const answer = answerFor(error.code);
  return answer ? answer(error, body) : null;
}
