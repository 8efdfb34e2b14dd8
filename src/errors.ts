/**
 * The error catalogue: every request-level error the service answers with, defined once with its
 * status, when it happens, its message and its hint; raised by name (`apiError('BATCH_TOO_LARGE',
 * rows)`), so a code cannot be misspelt and a message is never written twice. Every error leaves
 * in one body, `{ code, message, details, hint }` (docs/api.md, "Errors").
 *
 * PostgreSQL's own codes that reach the caller as they are (a value the column's type rejects,
 * and the like) are not listed here: src/http/sqlstates.ts decides which, with their statuses.
 */
import { LIMITS } from './limits.ts';

export interface ErrorText {
  readonly message: string;
  readonly details?: string | null;
  readonly hint?: string | null;
}

interface ErrorDefinition<Args extends readonly unknown[]> {
  readonly status: number;
  /** When the service answers with this code: the documentation's words (README, OpenAPI). */
  readonly when: string;
  readonly text: (...args: Args) => ErrorText;
  readonly headers?: Readonly<Record<string, string>>;
  /** Raised by the operator API alone: the partners' OpenAPI description leaves it out. */
  readonly operatorOnly?: true;
}

/** Keeps each definition's argument types, so `apiError` checks what a raise passes. */
const define = <Args extends readonly unknown[]>(definition: ErrorDefinition<Args>) => definition;

const RETRY_SOON = { 'retry-after': '1' } as const;
const TOKEN_HINT = 'Send Authorization: Bearer <token> with a token issued by the operator.';
const BAD_REQUEST_TEXTS = {
  method: { message: 'The request method is not an HTTP method.', hint: 'Use GET or HEAD to read; PUT, POST or PATCH to write.' },
  syntax: { message: 'The request is not valid HTTP/1.1.', hint: 'Check the request line, header syntax, Content-Length and Transfer-Encoding.' },
  encoding: { message: 'The request path is not valid percent-encoded UTF-8.' },
  route: { message: 'The request could not be routed.' },
  host: { message: 'An HTTP/1.1 request needs one Host header, naming a host and an optional port.' },
} as const satisfies Record<string, ErrorText>;
const UNAUTHORIZED_MESSAGES = {
  missing: 'The request carries no bearer token.',
  malformed: 'The Authorization header is not of the form "Bearer <token>".',
  unknown: 'The bearer token is unknown, revoked or expired.',
  operator: 'The operator API needs Authorization: Bearer $PDS_ADMIN_KEY.',
  metrics: 'GET /metrics needs Authorization: Bearer $PDS_METRICS_KEY.',
} as const;

export const ERRORS = {
  // Query language (PostgREST's codes and statuses).
  PGRST100: define({
    status: 400, when: 'The query string does not parse (a filter, select, order, limit or offset).',
    text: (what: string, raw: string, position: number, details: string) =>
      ({ message: `"failed to parse ${what} (${raw})" (line 1, column ${position + 1})`, details }),
  }),
  PGRST103: define({
    status: 416, when: 'The requested range (offset, limit, Range header) cannot be satisfied.',
    text: (details: string) => ({ message: 'Requested range not satisfiable', details }),
  }),
  PGRST106: define({
    status: 406, when: 'An Accept-Profile (reads) or Content-Profile (writes) naming a schema other than public.',
    text: (exposed: readonly string[]) => ({ message: `The schema must be one of the following: ${exposed.join(', ')}` }),
  }),
  PGRST107: define({
    status: 406, when: 'The Accept header names no media type the request can answer with (reads: JSON, the single object or CSV; writes: JSON).',
    text: (accept: string, offered: readonly string[]) => ({
      message: `None of these media types are available: ${accept}`,
      hint: `Accept ${offered.join(', ')}.`,
    }),
  }),
  PGRST108: define({
    status: 400, when: 'A parameter addresses an embedded resource; this interface has no embedding.',
    text: (name: string, parameter: string) => ({
      message: `'${name}' is not an embedded resource in this request`,
      details: `The parameter '${parameter}' addresses '${name}'.`,
      hint: `Verify that '${name}' is included in the 'select' query parameter.`,
    }),
  }),
  PGRST116: define({
    status: 406, when: 'A single object was asked for (Accept: application/vnd.pgrst.object+json) and not exactly one row matches.',
    text: (rows: number) => ({ message: 'Cannot coerce the result to a single JSON object', details: `The result contains ${rows} rows` }),
  }),
  PGRST122: define({
    status: 400, when: 'Prefer: handling=strict with a preference the service does not know or does not apply (a time zone other than UTC).',
    text: (invalid: readonly string[]) => ({ message: 'Invalid preferences given with handling=strict', details: `Invalid preferences: ${invalid.join(', ')}` }),
  }),
  PGRST123: define({
    status: 400, when: 'An aggregate function in select; this interface offers none.',
    text: () => ({ message: 'Use of aggregate functions is not allowed' }),
  }),
  PGRST125: define({
    status: 404, when: 'A path two or more segments below `/v1` (`/v1/students/1`, `/v1/students/`, `/v1/me/x`): a resource has no sub-paths.',
    text: () => ({ message: 'Invalid path specified in request URL' }),
  }),
  PGRST200: define({
    status: 400, when: 'Resource embedding in select; request the related resource from its own path.',
    text: (name: string) => ({
      message: `Could not find a relationship between the requested resource and '${name}'`,
      details: 'Resource embedding is not available on this interface.',
      hint: 'Request the related resource from its own path and filter by its id.',
    }),
  }),
  PGRST202: define({
    status: 404, when: 'A function call (`/v1/rpc/<name>`, postgrest-js\'s `rpc()`): this interface offers no functions.',
    text: (name: string) => ({ message: `Could not find the function public.${name} in the schema cache`, details: 'This interface offers no functions.' }),
  }),
  PGRST205: define({
    status: 404, when: 'No resource of that name.',
    text: (resource: string, known: readonly string[]) => ({
      message: `Could not find the resource '${resource}'`, details: `The resources are: ${known.join(', ')}.`,
    }),
  }),
  '42703': define({
    status: 400, when: 'A column the resource does not have.',
    text: (resource: string, column: string, known: readonly string[]) => ({
      message: `column ${resource}.${column} does not exist`, hint: `The columns of ${resource} are: ${known.join(', ')}.`,
    }),
  }),
  '42704': define({
    status: 400, when: 'A select cast to a type outside the allowed list; from PostgreSQL, an `fts` filter\'s text search configuration that does not exist.',
    text: (type: string, allowed: readonly string[]) => ({
      message: `type "${type}" does not exist`, hint: `A select cast may name: ${allowed.join(', ')}.`,
    }),
  }),
  QUERY_TOO_COMPLEX: define({
    status: 400, when: 'A read exceeds a complexity limit (conditions, tree nesting, in-list, select or order size, nesting of a JSON path, a JSON value or a full-text query, words of its full-text queries).',
    text: (reason: string) => ({
      message: `The query is too complex: ${reason}.`, hint: 'Split the request, or use keyset pagination and fewer conditions.',
    }),
  }),
  PATTERN_TOO_COMPLEX: define({
    status: 400, when: 'A like, ilike, match or imatch pattern that could run away (too long, back-references, nested or too many repetitions).',
    text: (operator: string, pattern: string, reason: string) => ({
      message: `The ${operator} pattern is refused: ${reason}.`,
      details: `Pattern: ${pattern.slice(0, 80)}`,
      hint: `Patterns hold at most ${LIMITS.maxPatternLength} characters; regular expressions have no back-references (\\1…\\9), `
        + `no repeated group that itself repeats (like (a+)+), at most ${LIMITS.maxPatternRepetitions} repetitions and `
        + `bounds up to {${LIMITS.maxRepetitionBound}}.`,
    }),
  }),
  URI_TOO_LONG: define({
    status: 414, when: `The query string is longer than ${LIMITS.maxQueryStringBytes} bytes, or a path segment longer than the router accepts.`,
    text: (part: 'query' | 'segment' = 'query') => part === 'query'
      ? { message: `The query string is longer than ${LIMITS.maxQueryStringBytes} bytes.`, hint: 'Use fewer or shorter filters, or page with keyset pagination.' }
      : { message: 'A path segment is longer than the service accepts.' },
  }),

  // Authentication and authorisation.
  UNAUTHORIZED: define({
    status: 401, when: 'A missing, malformed, unknown, revoked or expired token (or operator or metrics key).',
    text: (reason: keyof typeof UNAUTHORIZED_MESSAGES) =>
      ({ message: UNAUTHORIZED_MESSAGES[reason], hint: reason === 'operator' || reason === 'metrics' ? null : TOKEN_HINT }),
    headers: { 'www-authenticate': 'Bearer' },
  }),
  WRITE_NOT_ENABLED: define({
    status: 403, when: 'A write with a read-only token or a consortium token.',
    text: (token: 'consortium' | 'read_only') => token === 'consortium'
      ? { message: 'Consortium tokens can only read.', hint: 'Write with a write-enabled token of a single university.' }
      : { message: 'This token is not enabled for writing.', hint: 'Ask the operator for a write-enabled token of your university.' },
  }),
  TOO_MANY_LARGE_PAGES: define({
    status: 429,
    when: `${LIMITS.largePagesPerScope} pages of more than ${LIMITS.wholePageRows.toLocaleString('en-US')} rows are being sent to the token's universities already; each holds a database connection until read.`,
    text: () => ({
      message: `${LIMITS.largePagesPerScope} pages of more than ${LIMITS.wholePageRows.toLocaleString('en-US')} rows are being sent to your universities already.`,
      hint: `Read them to the end first, or page with limit=${LIMITS.wholePageRows} or less.`,
    }),
    headers: RETRY_SOON,
  }),
  TOO_MANY_REQUESTS_IN_FLIGHT: define({
    status: 429,
    when: `${LIMITS.requestsInFlightPerToken} requests of the token are in progress already on the instance, their answers not yet read.`,
    text: () => ({
      message: `${LIMITS.requestsInFlightPerToken} requests of this token are in progress already.`,
      hint: 'Read the answers of those first, or send fewer requests at once.',
    }),
    headers: RETRY_SOON,
  }),
  RATE_LIMITED: define({
    status: 429, when: 'Over the read or write rate limit, or too many failed authentications from one address; Retry-After says when to try again.',
    text: (perMinute: number, retryAfterSeconds: string, what: 'requests' | 'failed authentications') => ({
      message: `Rate limit of ${perMinute} ${what} per minute exceeded.`, hint: `Retry after ${retryAfterSeconds} seconds, with backoff.`,
    }),
  }),

  // Request shape.
  BAD_REQUEST: define({
    status: 400, when: 'Bytes that are not a valid HTTP/1.1 request (method, syntax, length framing, path encoding, Host).',
    text: (problem: keyof typeof BAD_REQUEST_TEXTS) => BAD_REQUEST_TEXTS[problem],
  }),
  REQUEST_TIMEOUT: define({
    status: 408, when: `The request line, headers or body did not arrive within the request timeout.`,
    text: () => ({ message: 'The request did not arrive in time.', hint: 'Send the headers and the body without pauses; the service closes slow requests.' }),
  }),
  HEADERS_TOO_LARGE: define({
    status: 431, when: 'The request line and headers are larger than the service accepts.',
    text: () => ({
      message: 'The request line and headers are larger than the service accepts.', hint: `Keep the URL and headers under ${LIMITS.headerBytes / 1024} KiB.`,
    }),
  }),
  EXPECTATION_FAILED: define({
    status: 417, when: 'An Expect header other than 100-continue.',
    text: (expect: string) => ({
      message: `The service does not support Expect: ${expect.slice(0, 100)}.`,
      hint: 'Send the request without an Expect header, or with Expect: 100-continue.',
    }),
  }),
  TRANSFER_CODING_NOT_IMPLEMENTED: define({
    status: 501, when: 'A transfer coding other than chunked (`Transfer-Encoding: gzip, chunked`); the service decodes none.',
    text: (codings: string) => ({
      message: `The request is sent with Transfer-Encoding: ${codings.slice(0, 100)}, and the service decodes no coding but chunked.`,
      hint: 'Send the body with Transfer-Encoding: chunked alone, or with Content-Length.',
    }),
  }),
  NOT_FOUND: define({
    status: 404, when: 'No endpoint at that path, or no record with that id on the operator API.',
    text: (message: string) => ({ message }),
  }),
  METHOD_NOT_ALLOWED: define({
    status: 405, when: 'A method the path does not serve; Allow lists those it does.',
    text: (method: string, allow: string) => ({ message: `${method} is not allowed here.`, hint: `Allowed: ${allow}.` }),
  }),
  INVALID_BODY: define({
    status: 400, when: 'A body that is not JSON, holds a __proto__ or constructor.prototype key, is empty where one is needed, lacks its rows array, or breaks the operator API schema.',
    text: (message: string, hint: string | null = null) => ({ message, hint }),
  }),
  INVALID_PARAMETER: define({
    status: 400, when: 'A malformed path or query parameter on the operator API or the change feed.',
    text: (problem: string) => ({ message: `The request is invalid: ${problem}.` }),
  }),
  UNSUPPORTED_MEDIA_TYPE: define({
    status: 415, when: 'A body (a write, or an operator request) not sent as application/json, or sent compressed (a Content-Encoding).',
    text: (contentEncoding: string | null = null) => ({
      message: contentEncoding === null
        ? 'Send the body as JSON with Content-Type: application/json.'
        : `The body is sent with Content-Encoding: ${contentEncoding}, which the service does not decode; send it uncompressed, without the header.`,
    }),
  }),
  PAYLOAD_TOO_LARGE: define({
    status: 413, when: `A body over ${LIMITS.bodyBytes / 1024 / 1024} MiB; nothing is written.`,
    text: () => ({
      message: `The request body is larger than the service accepts (${LIMITS.bodyBytes.toLocaleString('en-US')} bytes).`,
      hint: `Send at most ${LIMITS.batchRows} rows per request, without fields the record does not hold.`,
    }),
  }),
  INVALID_IDEMPOTENCY_KEY: define({
    status: 400, when: `An Idempotency-Key that is empty, longer than ${LIMITS.idempotencyKeyChars} characters or not printable ASCII.`,
    text: () => ({
      message: 'The Idempotency-Key header is not a valid key.',
      hint: `Send 1 to ${LIMITS.idempotencyKeyChars} printable ASCII characters, such as a random UUID.`,
    }),
  }),
  IDEMPOTENCY_KEY_REUSED: define({
    status: 422, when: 'An Idempotency-Key sent before with a different request (method, resource, Prefer or body); nothing is written.',
    text: () => ({
      message: 'This Idempotency-Key was used with a different request.',
      hint: 'Send a new key for a new request; repeat a key only with the exact request it was first sent with.',
    }),
  }),
  IDEMPOTENCY_KEY_IN_USE: define({
    status: 409, when: 'A write with this Idempotency-Key is still running; retry after Retry-After to get its answer.',
    text: () => ({ message: 'A request with this Idempotency-Key is still being processed.', hint: 'Retry after Retry-After: the repeat then gets its answer.' }),
    headers: RETRY_SOON,
  }),
  INVALID_CURSOR: define({
    status: 400, when: 'A change feed `since` that is not a cursor the feed answered, one of another feed, or one holding a position this database never gave out (forged, or from before a restore from backup).',
    text: (problem: string) => ({
      message: `The since cursor is not valid: ${problem}.`,
      hint: 'Send the next_cursor of an earlier answer of the same feed unchanged, or leave since out to read from the start.',
    }),
  }),
    BATCH_TOO_LARGE: define({
    status: 413, when: `More than ${LIMITS.batchRows} rows in one write; nothing is written.`,
    text: (rows: number) => ({
      message: `A batch holds at most ${LIMITS.batchRows} rows; this one has ${rows}. Nothing was written.`,
      hint: `Split the rows into batches of 200 to ${LIMITS.batchRows}.`,
    }),
  }),

  // Operator API records.
  CONFLICT: define({
    status: 409, when: 'A record with the same key exists already (the message names the field when it can).',
    text: (field?: string, value?: string) =>
      ({ message: field ? `A record with ${field} "${value}" already exists.` : 'A record with the same key already exists.' }),
  }),
  INVALID_REFERENCE: define({
    status: 409, when: 'A referenced record (university, consortium, campus…) does not exist; the message names it when it can.',
    text: (field?: string, value?: string) => ({ message: field ? `${field} ${value} does not exist.` : 'A referenced record does not exist.' }),
  }),
  EMAIL_TAKEN: define({
    operatorOnly: true,
    status: 409, when: 'An account already holds the address.',
    text: () => ({ message: 'An account already holds that address.' }),
  }),
  CAMPUS_NOT_FOUND: define({
    operatorOnly: true,
    status: 400, when: 'An app-side cohort names a campus the university does not have.',
    text: (campus: string) => ({ message: `No campus named "${campus}" at the university.` }),
  }),
  UNKNOWN_TEMPLATE: define({
    operatorOnly: true,
    status: 400, when: 'An app-side cohort names a résumé template the university does not have.',
    text: (unknown: readonly string[]) => ({ message: `Unknown résumé templates: ${unknown.join(', ')}.`, hint: 'Create them with POST /admin/v1/resume-templates.' }),
  }),
  INVALID_DATE_RANGE: define({
    operatorOnly: true,
    status: 400, when: 'An app-side cohort whose end_date is not after its start_date.',
    text: (start: string, end: string) => ({ message: `end_date ${end} is not after start_date ${start}.` }),
  }),
  TOKEN_NOT_ACTIVE: define({
    operatorOnly: true,
    status: 409, when: 'A rotation of a token that is revoked or expired already.',
    text: (state: 'revoked' | 'expired') => ({
      message: `The token is ${state}; only an active token can be rotated.`, hint: 'Issue a new token with POST /admin/v1/tokens.',
    }),
  }),

  // The service's and the store's side.
  CONCURRENT_WRITE: define({
    status: 503, when: 'The request raced another and lost; retry it.',
    text: () => ({ message: 'The request raced another; retry it.' }),
    headers: RETRY_SOON,
  }),
  QUERY_TIMEOUT: define({
    status: 503, when: 'A statement ran longer than the statement timeout and was cancelled.',
    text: () => ({
      message: 'The query ran longer than the statement timeout and was cancelled.',
      // A write's statements wait for the university's other writes (its lock), and time out so too.
      hint: 'A read: narrow the filter, page with a smaller limit, or use keyset pagination. A write: it waited on other writes of your university; retry it with backoff.',
    }),
    headers: RETRY_SOON,
  }),
  DATABASE_UNAVAILABLE: define({
    status: 503, when: 'The data store is unreachable, overloaded or restarting; retry after Retry-After.',
    text: () => ({ message: 'The data store is unavailable; retry with backoff.' }),
    headers: RETRY_SOON,
  }),
  DATABASE_BUSY: define({
    status: 503,
    when: 'The embedded store stayed busy with other requests for longer than a request may wait (PDS_EMBEDDED_WAIT_MS), or every connection large pages may hold is sending one.',
    text: (busy: { readonly waitedMs: number } | 'large pages') => ({
      message: 'The data store is busy with other requests; retry with backoff.',
      details: busy === 'large pages' ? 'Every connection large pages may hold is sending one.' : `No turn on the embedded store within ${busy.waitedMs} ms.`,
    }),
    headers: RETRY_SOON,
  }),
  NOT_READY: define({
    status: 503, when: 'GET /readyz while migrations are pending.',
    text: (pending: number) => ({ message: 'The service is not ready: the store is not migrated.', details: `${pending} migration(s) pending.` }),
    headers: RETRY_SOON,
  }),
  SHUTTING_DOWN: define({
    status: 503, when: 'A request that arrives while the instance is shutting down.',
    text: () => ({ message: 'The service is shutting down.', hint: 'Retry with backoff.' }),
    headers: RETRY_SOON,
  }),
  INTERNAL: define({
    status: 500, when: 'An unexpected failure; the body names no internals.',
    text: () => ({ message: 'The service failed to handle the request; retry with backoff.' }),
  }),
};

export type ErrorCode = keyof typeof ERRORS;
type ErrorArgs<C extends ErrorCode> = Parameters<(typeof ERRORS)[C]['text']>;

/** How the docs name an error: its status, then its code in code type (`413 \`BATCH_TOO_LARGE\``). */
export const statusAndCode = (code: ErrorCode): string => `${ERRORS[code].status} \`${code}\``;

/** An error on its way to the caller: a status, a code and the documented body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: string | null = null,
    readonly hint: string | null = null,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  /** The same error with more response headers (Retry-After, Allow, Content-Range). */
  withHeaders(headers: Readonly<Record<string, string>>): ApiError {
    return new ApiError(this.status, this.code, this.message, this.details, this.hint, { ...this.headers, ...headers });
  }

  /**
   * The same error with a hint that quotes `requestId`, after its own: every 5xx answer carries
   * one (docs/decisions.md, Errors), so that a partner can name the request to support.
   */
  quotingRequest(requestId: string): ApiError {
    const quote = `Quote request id ${requestId} when contacting support.`;
    return new ApiError(this.status, this.code, this.message, this.details, this.hint ? `${this.hint} ${quote}` : quote, this.headers);
  }

  toBody() {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint };
  }
}

/** The catalogue's error `code`, with the text its definition builds from `args`. */
export function apiError<C extends ErrorCode>(code: C, ...args: ErrorArgs<C>): ApiError {
  const definition: ErrorDefinition<ErrorArgs<C>> = ERRORS[code] as never;
  const text = definition.text(...args);
  return new ApiError(definition.status, String(code), text.message, text.details ?? null, text.hint ?? null, definition.headers);
}
