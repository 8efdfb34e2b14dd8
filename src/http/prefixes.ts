/**
 * The path prefixes the two APIs are served under: the routing (src/http/app.ts), CORS
 * (src/http/cors.ts) and the OpenAPI description's server (src/http/openapi/) read them here.
 */

/** The partner API: reads, writes and the token's own description. */
export const PARTNER_PREFIX = '/v1';

/** The operator API, enabled by PDS_ADMIN_KEY. */
export const OPERATOR_PREFIX = '/admin/v1';
