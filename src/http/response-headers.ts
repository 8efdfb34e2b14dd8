/**
 * The response headers the service sets beyond HTTP's own, by the names the OpenAPI description
 * and CORS show (header names are case-insensitive). The rate limits' are RATE_LIMIT_HEADERS
 * (src/http/rate-limits.ts).
 */
import type { FastifyReply } from 'fastify';

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

/**
 * Names request headers the answer depends on in its Vary, after CORS's Origin (src/http/cors.ts),
 * so that a cache keeps one answer per combination (RFC 9110, section 12.5.5); set before the
 * answer is known, so that a refusal of one of them (406, 416) varies on it too.
 */
export function varyOn(reply: FastifyReply, names: string): void {
  const vary = reply.getHeader('vary');
  reply.header('vary', vary === undefined ? names : `${String(vary)}, ${names}`);
}
