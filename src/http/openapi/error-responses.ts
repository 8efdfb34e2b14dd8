/**
 * The error responses of the OpenAPI description: the `Error` body, with its codes off the error
 * catalogue and the SQLSTATE table (src/http/sqlstates.ts), and one response per status.
 */
import { STATUS_CODES } from 'node:http';
import type { OpenAPIV3_1 } from 'openapi-types';
import { PostgresError } from 'pg-error-enum';
import { ERRORS, type ErrorCode, statusAndCode } from '../../errors.ts';
import { RESPONSE_HEADERS } from '../response-headers.ts';
import type { JsonSchema } from '../schemas.ts';
import { passThroughStatus } from '../sqlstates.ts';
import { HEADERS, type HeaderName, RATE_LIMIT_HEADER_NAMES, headerRefs, schemaRef } from './components.ts';

/** PostgreSQL's codes that the SQLSTATE table (src/http/sqlstates.ts) passes to the caller as they are. */
const passedThroughSqlstates = [...new Set<string>(Object.values(PostgresError))]
  .filter((code) => passThroughStatus(code) !== undefined && !Object.hasOwn(ERRORS, code))
  .sort();

/** The catalogue's codes a partner can meet: the description leaves out those of the operator API alone. */
const PARTNER_ERRORS = Object.entries(ERRORS).filter(([, definition]) => !('operatorOnly' in definition));

export const ERROR_SCHEMA: JsonSchema = {
  type: 'object',
  description: 'The body of every error response.',
  required: ['code', 'message', 'details', 'hint'],
  properties: {
    code: {
      type: 'string',
      enum: [...PARTNER_ERRORS.map(([code]) => code), ...passedThroughSqlstates],
      description: 'A code of the service\'s catalogue (docs/api.md, "Errors"), or the SQLSTATE of a PostgreSQL error the '
        + 'request\'s own values caused (a value the column\'s type refuses, an operator the type lacks), as PostgREST passes them on.',
    },
    message: { type: 'string' },
    details: { type: ['string', 'null'] },
    hint: { type: ['string', 'null'] },
  },
};

/** Headers added where the error is raised, beyond the catalogue's own and the rate limit's. */
const RAISED_ERROR_HEADERS: Readonly<Partial<Record<number, readonly HeaderName[]>>> = {
  415: ['Accept-Encoding'], // src/http/json-bodies.ts, a compressed body
  416: [RESPONSE_HEADERS.contentRange], // src/http/read-response.ts
  429: ['Retry-After'],
};

/**
 * The statuses whose answers carry the headers of a rate limit. Every answer to a valid partner
 * token carries the limit that counted it (src/http/app.ts), a 503 of the store's too, a 401 the
 * failed authentications' (src/http/auth.ts); the readiness probe's 503 and the edge's refusals
 * (a path segment too long for the router among them) come before any count, and go without.
 */
const COUNTED_STATUSES: ReadonlySet<number> = new Set([400, 401, 403, 404, 406, 409, 413, 414, 415, 416, 422, 429, 503]);

const headerNamed = new Map(Object.keys(HEADERS).map((name) => [name.toLowerCase(), name as HeaderName]));

function catalogueHeaders(status: number): HeaderName[] {
  const names = Object.values(ERRORS).filter((d) => d.status === status).flatMap((d) => Object.keys(d.headers ?? {}));
  return [...new Set(names)].map((name) => {
    const documented = headerNamed.get(name);
    if (!documented) throw new Error(`The catalogue's header ${name} has no entry in the OpenAPI HEADERS.`);
    return documented;
  });
}

/** `Bad Request` → `BadRequest`: the name of a status's error response. */
export const errorResponseName = (status: number) => (STATUS_CODES[status] ?? String(status)).replace(/[^A-Za-z]/g, '');

/** The error response of a status: its codes from the catalogue and the SQLSTATE table, with their meanings. */
export function errorResponse(status: number): OpenAPIV3_1.ResponseObject {
  const codes = PARTNER_ERRORS.filter(([, d]) => d.status === status).map(([code, d]) => `\`${code}\`: ${d.when}`);
  const sqlstates = passedThroughSqlstates.some((code) => passThroughStatus(code) === status);
  if (codes.length === 0 && !sqlstates) throw new Error(`No error code answers with status ${status}.`);
  const passedOn = sqlstates ? ['A PostgreSQL SQLSTATE (listed in `Error.code`): a value or operator of the request the column\'s type refuses.'] : [];
  const headers = [...new Set([
    ...catalogueHeaders(status), ...RAISED_ERROR_HEADERS[status] ?? [], ...(COUNTED_STATUSES.has(status) ? RATE_LIMIT_HEADER_NAMES : []),
    RESPONSE_HEADERS.requestId,
  ])];
  return {
    description: [`${STATUS_CODES[status]}.`, ...codes, ...passedOn].join('\n\n'),
    headers: headerRefs(headers),
    content: { 'application/json': { schema: schemaRef('Error') } },
  };
}

/**
 * What the edge refuses before any route runs (src/http/edge.ts), and a method the path does not
 * serve (src/http/methods.ts): every operation can meet these.
 */
const REFUSALS: readonly ErrorCode[] = ['BAD_REQUEST', 'REQUEST_TIMEOUT', 'EXPECTATION_FAILED', 'HEADERS_TOO_LARGE', 'METHOD_NOT_ALLOWED'];

export const REFUSED_REQUEST: OpenAPIV3_1.ResponseObject = {
  description: ['A request the service refuses whatever its path, or a method the path does not serve.',
    ...REFUSALS.map((code) => `\`${code}\` (${ERRORS[code].status}): ${ERRORS[code].when}`)].join('\n\n'),
  // A method refused on a partner path is counted, after the token check (src/http/methods.ts).
  headers: headerRefs(['Allow', ...RATE_LIMIT_HEADER_NAMES, RESPONSE_HEADERS.requestId]),
  content: { 'application/json': { schema: schemaRef('Error') } },
};

export const UNEXPECTED_ERROR: OpenAPIV3_1.ResponseObject = {
  description: `Any other error, such as ${statusAndCode('INTERNAL')}, or ${statusAndCode('TRANSFER_CODING_NOT_IMPLEMENTED')} for a request sent with a transfer coding other than chunked, with the same body; a 5xx's hint quotes the request id.`,
  headers: headerRefs([RESPONSE_HEADERS.requestId]),
  content: { 'application/json': { schema: schemaRef('Error') } },
};
