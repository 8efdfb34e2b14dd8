/**
 * The OpenAPI description, generated from the route schemas, which in turn come from the
 * resource registry. Served at GET /v1/openapi.json (src/http/app.ts) for client generation.
 */
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Column, Resource } from '../resources/registry.ts';

const COLUMN_SCHEMAS: Record<Column['type'], Record<string, unknown>> = {
  uuid: { type: 'string', format: 'uuid' },
  text: { type: 'string' },
  integer: { type: 'integer' },
  numeric: { type: 'number' },
  boolean: { type: 'boolean' },
  date: { type: 'string', format: 'date' },
  timestamptz: { type: 'string', format: 'date-time' },
  jsonb: {},
  'text[]': { type: 'array', items: { type: 'string' } },
  'uuid[]': { type: 'array', items: { type: 'string', format: 'uuid' } },
};

function columnSchema(column: Column): Record<string, unknown> {
  const notes = [column.description, column.large ? 'Large column: leave it out with `select` to keep pages small.' : undefined]
    .filter(Boolean).join(' ');
  return {
    ...COLUMN_SCHEMAS[column.type],
    ...(column.nullable ? { nullable: true } : {}),
    ...(column.enum ? { enum: column.enum } : {}),
    ...(notes ? { description: notes } : {}),
  };
}

export function rowSchema(resource: Resource) {
  return {
    type: 'object',
    description: 'Only the columns named by `select` are present when it is given.',
    properties: Object.fromEntries(resource.columns.map((c) => [c.name, columnSchema(c)])),
  };
}

const errorBody = {
  type: 'object',
  required: ['code', 'message', 'details', 'hint'],
  properties: {
    code: { type: 'string' },
    message: { type: 'string' },
    details: { type: 'string', nullable: true },
    hint: { type: 'string', nullable: true },
  },
};

export const errorResponse = (description: string) => ({ description, ...errorBody });

/**
 * Collects the schema of every route registered after it (fastify-plugin, so @fastify/swagger's
 * onRoute hook sees the routes of every sibling plugin).
 */
export const openApi = fp(async (app: FastifyInstance) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Partner data service',
        version: '1.0.0',
        description: 'Career-services data for partners. Reads use the PostgREST query language on every list ' +
          'endpoint; writes push cohorts and students in batches of up to 500 rows. Errors have the body ' +
          '{code, message, details, hint}.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
}, { name: 'openapi' });

/** GET /openapi.json under the prefix it is registered with; needs no token. */
export async function openApiDocument(app: FastifyInstance): Promise<void> {
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
