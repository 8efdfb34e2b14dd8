/**
 * The response headers the service sets beyond HTTP's own, by the names the OpenAPI description
 * and CORS show (header names are case-insensitive). The rate limits' are RATE_LIMIT_HEADERS
 * (src/http/rate-limits.ts).
 */
export const RESPONSE_HEADERS = {
  /** A read's rows and total (src/http/read-response.ts). */
  contentRange: 'Content-Range',
  /** A read's page: its path and its query string in key order, as PostgREST names it (src/http/read-response.ts). */
  contentLocation: 'Content-Location',
  /** The preferences of a Prefer header that were honoured. */
  preferenceApplied: 'Preference-Applied',
  /** `true` on a write answered from its Idempotency-Key (src/http/write-routes.ts). */
  idempotentReplayed: 'Idempotent-Replayed',
  /** The request's id, as the access log has it (src/http/edge.ts). */
  requestId: 'X-Request-Id',
} as const;
