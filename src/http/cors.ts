/**
 * CORS on the partner API, as PostgREST does it by default (docs/api.md, "Browsers (CORS)"):
 * any origin (`Access-Control-Allow-Origin: *`) unless PDS_CORS_ORIGINS lists the exact origins
 * allowed, never credentials (the bearer token travels in Authorization, not in cookies), every
 * request header a preflight asks for, and the preflight answered 204 without a token. The headers are set in the first onRequest hook, so
 * every answer to a browser, errors (401, 404, 405, 429, 5xx) included, carries them and the
 * browser can read it. A request without `Origin` is not a cross-origin call: like PostgREST
 * (wai-cors, which passes such a request through), the service answers it without them, which
 * spares every server-to-server answer about 200 bytes of headers. The operator API and the
 * health checks are not for browsers and get none.
 */
import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { PARTNER_PREFIX } from './prefixes.ts';
import { RATE_LIMIT_HEADERS } from './rate-limits.ts';
import { RESPONSE_HEADERS } from './response-headers.ts';

/** The response headers a page's script may read beyond the safelisted Content-Type (docs/api.md, Browsers, is generated from this list). */
export const CORS_EXPOSED_HEADERS = [
  ...Object.values(RESPONSE_HEADERS), 'Allow', 'Retry-After', ...Object.values(RATE_LIMIT_HEADERS),
];

/**
 * Every method a /v1 path answers, refusals included: DELETE is allowed through the preflight
 * so that the browser shows the service's own 405 with Allow instead of an opaque CORS failure.
 */
const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** PostgREST's: a browser may cache a preflight for a day. */
const PREFLIGHT_MAX_AGE_SECONDS = 86_400;

const isPartnerApi = (request: FastifyRequest) => {
  const path = request.url.split('?')[0];
  return path === PARTNER_PREFIX || path.startsWith(`${PARTNER_PREFIX}/`);
};

/** An OPTIONS request that is a preflight; a bare OPTIONS is a method like any other (405). */
const isPreflight = (request: FastifyRequest) =>
  request.method === 'OPTIONS' && request.headers.origin !== undefined && request.headers['access-control-request-method'] !== undefined;

export const corsPolicy = fp(async (app: FastifyInstance, settings: { origins: readonly string[] | undefined }) => {
  const policy: FastifyCorsOptions = {
    origin: settings.origins ? [...settings.origins] : '*',
    credentials: false,
    methods: CORS_METHODS,
    // No list: the preflight allows the request headers it is asked for (with Vary:
    // Access-Control-Request-Headers), as PostgREST does, so that what clients add of their own
    // (supabase-js's X-Client-Info and apikey, postgrest-js's X-Retry-Count and Accept-Profile)
    // passes. A header the service does not read is ignored.
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  };
  await app.register(cors, {
    hook: 'onRequest',
    delegator: (request, callback) => callback(null, request.headers.origin !== undefined && isPartnerApi(request)
      ? { ...policy, preflight: isPreflight(request) }
      : { origin: false }),
  });
}, { name: 'cors' });
