/**
 * The path prefixes the two APIs are served under: the routing (src/http/app.ts), CORS
 * (src/http/cors.ts) and the OpenAPI description's server (src/http/openapi/) read them here,
 * with the paths that the routes, their description and the start banner (src/main.ts) share.
 */

/** The partner API: reads, writes and the token's own description. */
export const PARTNER_PREFIX = '/v1';

/** The operator API, enabled by PDS_ADMIN_KEY. */
export const OPERATOR_PREFIX = '/admin/v1';

/** The OpenAPI description, under the partner prefix (src/http/openapi/document.ts). */
export const OPENAPI_PATH = '/openapi.json';

/** Liveness and readiness, at the root (src/http/health.ts). */
export const HEALTH_PATHS = { live: '/healthz', ready: '/readyz' } as const;
