/**
 * PUT, POST and PATCH on /v1/students and /v1/cohorts: batches of up to 500 rows with one
 * outcome per row. HTTP 200 means the batch was processed; the rows say how each went.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { WriteMode } from '../writes/batch.ts';
import { INTAKE_TERMS, STUDY_MODES } from '../writes/cohorts.ts';
import { writeCohorts, writeStudents } from '../writes/run.ts';
import { requireWriteToken } from './auth.ts';
import { errorResponse } from './openapi.ts';
import type { RateLimitHooks } from './rate-limits.ts';

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

const studentRowSchema = {
  type: 'object',
  required: ['email'],
  properties: {
    email: { type: 'string', format: 'email', description: 'Unique across the service; the key for PATCH.' },
    first_name: { type: 'string' },
    last_name: { type: 'string' },
    cohort_name: { type: 'string', description: 'An existing cohort of your university; a different name moves the student.' },
    is_alumni: { type: 'boolean', description: 'Required on create.' },
    external_id: { type: 'string', nullable: true, description: 'Durable student number; matched before email.' },
    phone: { type: 'string', nullable: true, description: 'E.164, e.g. +447700900123.' },
    graduation_date: { type: 'string', format: 'date', nullable: true, description: 'Date of actual graduation.' },
  },
  additionalProperties: true,
  description: 'Other keys are not saved and are listed in dropped_fields.',
};

const cohortRowSchema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', maxLength: 200, description: 'The key within your university; frozen after creation.' },
    display_name: { type: 'string' }, program: { type: 'string' }, degree: { type: 'string' },
    start_date: { type: 'string', format: 'date' }, end_date: { type: 'string', format: 'date' },
    intake_year: { type: 'integer' }, intake_term: { type: 'string', enum: INTAKE_TERMS },
    campus_name: { type: 'string', nullable: true }, study_mode: { type: 'string', enum: STUDY_MODES, nullable: true },
    resume_template_names: { type: 'array', items: { type: 'string' }, nullable: true },
  },
  additionalProperties: true,
};

const rejectionFields = { code: { type: 'string' }, message: { type: 'string' } };

function writeSchema(resource: 'students' | 'cohorts', mode: WriteMode) {
  const row = resource === 'students' ? studentRowSchema : cohortRowSchema;
  const result = resource === 'students'
    ? { email: { type: 'string' }, status: { type: 'string', enum: ['created', 'updated', 'unchanged', 'rejected'] }, id: { type: 'string', format: 'uuid' }, cohort_id: { type: 'string', format: 'uuid', nullable: true }, ...rejectionFields, notes: { type: 'array', items: { type: 'string' } } }
    : { name: { type: 'string' }, status: { type: 'string', enum: ['created', 'updated', 'unchanged', 'rejected'] }, id: { type: 'string', format: 'uuid' }, ...rejectionFields };
  const extra = resource === 'students' ? { cohorts_created: { type: 'integer' }, invitations_sent: { type: 'integer' } } : {};
  return {
    tags: ['write'],
    summary: `${mode.toUpperCase()} ${resource}`,
    description: `${SUMMARIES[mode]} At most ${LIMITS.batchRows} rows per request.`,
    body: { type: 'object', required: [resource], properties: { [resource]: { type: 'array', maxItems: LIMITS.batchRows, items: row } } },
    response: {
      200: {
        description: 'The batch was processed; read results for each row.',
        type: 'object',
        properties: { counts, ...extra, dropped_fields: { type: 'array', items: { type: 'string' } }, results: { type: 'array', items: { type: 'object', properties: result } } },
      },
      400: errorResponse('INVALID_BODY: not JSON, or no rows array.'),
      401: errorResponse('Missing, unknown, revoked or expired token.'),
      403: errorResponse('WRITE_NOT_ENABLED: a read token or a consortium token.'),
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

export function registerWriteRoutes(app: FastifyInstance, deps: { db: Database; limits: RateLimitHooks }): void {
  const write = {
    students: writeStudents,
    cohorts: writeCohorts,
  };
  for (const resource of ['students', 'cohorts'] as const) {
    for (const method of ['PUT', 'POST', 'PATCH'] as const) {
      const mode = MODES[method];
      app.route({
        method,
        url: `/v1/${resource}`,
        schema: writeSchema(resource, mode),
        // Rows are validated one by one into per-row outcomes; the schema documents them.
        validatorCompiler: () => () => true,
        onRequest: requireWriteToken,
        preHandler: deps.limits.write,
        handler: async (request: FastifyRequest, reply: FastifyReply) => {
          requireJson(request);
          const principal = request.principal;
          const result = await write[resource](deps.db, principal.universityId!, mode, request.body);
          return reply.code(200).type('application/json; charset=utf-8').send(JSON.stringify(result));
        },
      });
    }
  }
}
