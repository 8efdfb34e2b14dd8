/**
 * PostgREST's schema profiles: a client names the schema it writes in `Content-Profile` (POST,
 * PUT, PATCH, DELETE) and the one it reads in `Accept-Profile` (other methods), as postgrest-js's `schema()`
 * does. The service exposes one, `public`; any other is 406 PGRST106, where ignoring it answered
 * another schema's read with this one's rows.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { apiError } from '../errors.ts';
import { WRITING_METHODS } from './methods.ts';

/** The one schema the partner API exposes. */
const EXPOSED_SCHEMA = 'public';

function checkProfile(request: FastifyRequest): void {
  // The methods that write name their schema in Content-Profile; every other in Accept-Profile.
  const header = request.headers[WRITING_METHODS.has(request.method) ? 'content-profile' : 'accept-profile'];
  if (header === undefined) return;
  // A repeated header arrives joined by commas; PostgREST reads its first value.
  const profile = (Array.isArray(header) ? header[0] : header).split(',')[0].trim();
  if (profile !== EXPOSED_SCHEMA) throw apiError('PGRST106', [EXPOSED_SCHEMA]);
}

/** After the token check (PostgREST reads the profile after the JWT), on every partner route. */
export const schemaProfiles = fp(async (app: FastifyInstance) => {
  app.addHook('onRequest', async (request) => checkProfile(request));
}, { name: 'schema-profiles', dependencies: ['partner-auth'] });
