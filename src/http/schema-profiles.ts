/**
 * PostgREST's schema profiles: a client names the schema it reads in `Accept-Profile` (GET,
 * HEAD) and the one it writes in `Content-Profile` (other methods), as postgrest-js's `schema()`
 * does. The service exposes one, `public`; any other is 406 PGRST106, where ignoring it answered
 * another schema's read with this one's rows.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { apiError } from '../errors.ts';

/** The one schema the partner API exposes. */
export const EXPOSED_SCHEMA = 'public';

function checkProfile(request: FastifyRequest): void {
  const reads = request.method === 'GET' || request.method === 'HEAD';
  const profile = request.headers[reads ? 'accept-profile' : 'content-profile'];
  if (profile !== undefined && profile !== EXPOSED_SCHEMA) throw apiError('PGRST106', [EXPOSED_SCHEMA]);
}

/** After the token check (PostgREST reads the profile after the JWT), on every partner route. */
export const schemaProfiles = fp(async (app: FastifyInstance) => {
  app.addHook('onRequest', async (request) => checkProfile(request));
}, { name: 'schema-profiles', dependencies: ['partner-auth'] });
