/**
 * PUT, POST and PATCH on /v1/students and /v1/cohorts: batches of up to 500 rows with one
 * outcome per row. HTTP 200 means the batch was processed; the rows say how each went.
 * `Prefer: tx=rollback` makes it a dry run: the same answer, nothing written.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { apiError } from '../errors.ts';
import { requireJsonAccept } from '../query/media-types.ts';
import { parseWritePreferences } from '../query/preferences.ts';
import { WRITABLE_RESOURCES, type WritableResource } from '../resources/write-shapes.ts';
import type { WriteMode } from '../writes/batch.ts';
import { writeCohorts, writeStudents } from '../writes/batches.ts';
import { requireWriteToken } from './auth.ts';
import type { RateLimitHooks } from './rate-limits.ts';
import { noteBatch } from './request-notes.ts';

const MODES: Record<'PUT' | 'POST' | 'PATCH', WriteMode> = { PUT: 'put', POST: 'post', PATCH: 'patch' };

function requireJson(request: FastifyRequest): void {
  const type = request.headers['content-type'] ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw apiError('UNSUPPORTED_MEDIA_TYPE');
  }
}

const WRITERS: Record<WritableResource, typeof writeStudents | typeof writeCohorts> = {
  students: writeStudents,
  cohorts: writeCohorts,
};

export function registerWriteRoutes(app: FastifyInstance, deps: { db: Database; limits: RateLimitHooks }): void {
  for (const resource of WRITABLE_RESOURCES) {
    for (const method of ['PUT', 'POST', 'PATCH'] as const) {
      // No body schema: rows are validated one by one into per-row outcomes (src/writes/).
      app.route({
        method,
        url: `/${resource}`,
        onRequest: requireWriteToken,
        preHandler: deps.limits.write,
        handler: async (request, reply) => {
          requireJson(request);
          const { tx, preferenceApplied } = parseWritePreferences(request.headers.prefer);
          const dryRun = tx === 'rollback';
          requireJsonAccept(request.headers.accept);
          const principal = request.principal;
          const result = await WRITERS[resource](deps.db, principal.universityId!, MODES[method], request.body, { dryRun });
          // The metrics and access log count written rows; a dry run wrote none.
          if (!dryRun) noteBatch(request, resource, result);
          if (preferenceApplied.length > 0) reply.header('preference-applied', preferenceApplied.join(', '));
          return reply.code(200).type('application/json; charset=utf-8').send(JSON.stringify(result));
        },
      });
    }
  }
}
