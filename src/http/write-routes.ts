/**
 * PUT, POST and PATCH on /v1/students and /v1/cohorts: batches of up to 500 rows with one
 * outcome per row. HTTP 200 means the batch was processed; the rows say how each went.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import { requireJsonAccept } from '../query/media-types.ts';
import { WRITABLE_RESOURCES, type WritableResource } from '../resources/write-shapes.ts';
import type { WriteMode } from '../writes/batch.ts';
import { writeCohorts, writeStudents } from '../writes/batches.ts';
import { COHORT_ROW_CODES, STUDENT_ROW_CODES } from '../writes/row-codes.ts';
import { requireWriteToken } from './auth.ts';
import { errorResponse } from './openapi.ts';
import type { RateLimitHooks } from './rate-limits.ts';
import { batchBody } from './write-schemas.ts';

const MODES: Record<'PUT' | 'POST' | 'PATCH', WriteMode> = { PUT: 'put', POST: 'post', PATCH: 'patch' };
const SUMMARIES = {
  put: 'Upsert: creates what is missing, updates what changed; safe to replay.',
  post: 'Create only: an existing row is rejected ALREADY_EXISTS.',
  patch: 'Update only, never creates: no match is rejected NOT_FOUND. Omitted fields are left alone.',
};

const counts = {
  type: 'object',
  properties: Object.fromEntries(['created', 'updated', 'unchanged', 'rejected'].map((k) => [k, { type: 'integer' }])),
};

const ROW_CODES: Record<WritableResource, readonly string[]> = {
  students: Object.keys(STUDENT_ROW_CODES),
  cohorts: Object.keys(COHORT_ROW_CODES),
};

function writeSchema(resource: WritableResource, mode: WriteMode) {
  const rejectionFields = { code: { type: 'string', enum: ROW_CODES[resource] }, message: { type: 'string' } };
  const result = resource === 'students'
    ? { email: { type: 'string' }, status: { type: 'string', enum: ['created', 'updated', 'unchanged', 'rejected'] }, id: { type: 'string', format: 'uuid' }, cohort_id: { type: 'string', format: 'uuid', nullable: true }, ...rejectionFields, notes: { type: 'array', items: { type: 'string' } } }
    : { name: { type: 'string' }, status: { type: 'string', enum: ['created', 'updated', 'unchanged', 'rejected'] }, id: { type: 'string', format: 'uuid' }, ...rejectionFields };
  const extra = resource === 'students' ? { cohorts_created: { type: 'integer' }, invitations_sent: { type: 'integer' } } : {};
  return {
    tags: ['write'],
    summary: `${mode.toUpperCase()} ${resource}`,
    description: `${SUMMARIES[mode]} At most ${LIMITS.batchRows} rows per request.`,
    body: batchBody(resource),
    response: {
      200: {
        description: 'The batch was processed; read results for each row.',
        type: 'object',
        properties: { counts, ...extra, dropped_fields: { type: 'array', items: { type: 'string' } }, results: { type: 'array', items: { type: 'object', properties: result } } },
      },
      400: errorResponse('INVALID_BODY: not JSON, or no rows array.'),
      401: errorResponse('Missing, unknown, revoked or expired token.'),
      403: errorResponse('WRITE_NOT_ENABLED: a read token or a consortium token.'),
      406: errorResponse('PGRST107: the Accept header excludes application/json, the only type a write answers with.'),
      413: errorResponse('BATCH_TOO_LARGE over 500 rows, or PAYLOAD_TOO_LARGE; nothing written.'),
      415: errorResponse('The body is not sent as application/json.'),
      429: errorResponse('Rate limited; retry after the Retry-After seconds.'),
    },
  };
}

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
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  for (const resource of WRITABLE_RESOURCES) {
    for (const method of ['PUT', 'POST', 'PATCH'] as const) {
      const mode = MODES[method];
      typed.route({
        method,
        url: `/${resource}`,
        schema: writeSchema(resource, mode),
        // Rows are validated one by one into per-row outcomes; the schema documents them.
        validatorCompiler: () => () => true,
        onRequest: requireWriteToken,
        preHandler: deps.limits.write,
        handler: async (request, reply) => {
          requireJson(request);
          requireJsonAccept(request.headers.accept);
          const principal = request.principal;
          const result = await WRITERS[resource](deps.db, principal.universityId!, mode, request.body);
          return reply.code(200).type('application/json; charset=utf-8').send(JSON.stringify(result));
        },
      });
    }
  }
}
