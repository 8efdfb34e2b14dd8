/**
 * The partners' OpenAPI 3.1 description, built by a pure function from the operation table
 * (src/http/openapi/operations.ts) and the components (src/http/openapi/components.ts), and
 * served at GET /v1/openapi.json. The operator API is not in it.
 */
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { OpenAPIV3, OpenAPIV3_1 } from 'openapi-types';
import { LIMITS } from '../../limits.ts';
import { resources } from '../../resources/registry.ts';
import { meResponse } from '../me.ts';
import { OPENAPI_PATH, PARTNER_PREFIX } from '../prefixes.ts';
import { RESPONSE_HEADERS } from '../response-headers.ts';
import type { JsonSchema } from '../schemas.ts';
import { BATCH_SCHEMAS } from './batch-schemas.ts';
import { CHANGE_SCHEMAS } from './change-schemas.ts';
import { HEADERS, PARAMETERS, READ_SCHEMAS, SECURITY_SCHEMES, headerRefs } from './components.ts';
import { ERROR_SCHEMA, REFUSED_REQUEST, UNEXPECTED_ERROR, errorResponse, errorResponseName } from './error-responses.ts';
import { type DocumentedOperation, OPERATIONS, OTHER_TAGS, describedPath, withoutBody } from './operations.ts';

/**
 * Every named schema: read rows and filters, batch writes, the change feed, the token's
 * description, the error body. The token's is the route's TypeBox schema: JSON Schema, though not typed as openapi-types'.
 */
const SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  ...READ_SCHEMAS, ...BATCH_SCHEMAS, ...CHANGE_SCHEMAS, Me: meResponse as JsonSchema, Error: ERROR_SCHEMA,
};

const INFO: OpenAPIV3_1.InfoObject = {
  title: 'Partner data service',
  version: '1.0.0',
  description: 'Career-services data for universities\' partners. Reads use the PostgREST query language on every list '
    + 'endpoint; writes push cohorts and students in batches, with one outcome per row; the change feed answers what '
    + 'changed since a cursor. Every error has the body `{code, message, details, hint}`.\n\n'
    + '## A nightly sync\n\n'
    + '1. The SIS checks tonight\'s batches with a dry run: the same writes with `Prefer: tx=rollback`, which answer every '
    + 'row\'s outcome and write nothing.\n'
    + '2. It pushes cohorts, then students, in batches of at most ' + LIMITS.batchRows + ' rows (`PUT /cohorts`, `PUT /students`), '
    + 'each with an `Idempotency-Key` of its own; on 429 or 5xx it retries the same request with the same key after '
    + '`Retry-After`, and a batch already written is answered from its key (`Idempotent-Replayed: true`), never written twice.\n'
    + '3. A partner keeping a copy calls `GET /changes?since=<cursor>` while `has_more` is true, applies each entry '
    + '(upsert `row` by `id`; delete the id of an `erased` tombstone), and stores `next_cursor` until the next night. '
    + 'Without `since` it reads every row as it is now.\n\n'
    + '`npx pds-sync` (in the service\'s repository) does steps 1 and 2 from CSV files; docs/nightly-sync.md there shows both jobs as scripts.',
  contact: { name: 'Partner support: the operator that issued your token' },
  license: { name: 'Proprietary: use under your data-sharing agreement with the operator', identifier: 'LicenseRef-Proprietary' },
};

/** The probes are served at the root, beside the partner API rather than under it. */
const ROOT_SERVER: OpenAPIV3_1.ServerObject = { url: '/', description: 'The service root.' };

const responseRef = (name: string): OpenAPIV3_1.ReferenceObject => ({ $ref: `#/components/responses/${name}` });

/** Every answer of a route carries its request id (src/http/edge.ts, onSend). */
function withRequestId(response: OpenAPIV3_1.ResponseObject | OpenAPIV3_1.ReferenceObject): OpenAPIV3_1.ResponseObject {
  if ('$ref' in response) throw new Error('An operation\'s own responses are written in place, not referenced.');
  return { ...response, headers: { ...response.headers, ...headerRefs([RESPONSE_HEADERS.requestId]) } };
}

/**
 * A path item of 3.1 operations: openapi-types' own PathItemObject also demands 3.0 operations
 * of it, which 3.1 schemas are not.
 */
type PathItem = { servers?: OpenAPIV3_1.ServerObject[] } & Partial<Record<DocumentedOperation['method'], OpenAPIV3_1.OperationObject>>;

export type OpenApiDocument = Omit<OpenAPIV3_1.Document, 'paths'> & { paths: Record<string, PathItem> };

function buildOpenApiDocument(): OpenApiDocument {
  const paths: Record<string, PathItem> = {};
  const errorStatuses = new Set<number>();
  for (const { method, url, errors, operation } of OPERATIONS) {
    const { path, partner } = describedPath(url);
    const item = paths[path] ?? (paths[path] = partner ? {} : { servers: [ROOT_SERVER] });
    // A HEAD answer has no body: its error responses are written in place, without content.
    const failures = method === 'head'
      ? { ...Object.fromEntries(errors.map((status) => [status, withoutBody(errorResponse(status))])), '4XX': withoutBody(REFUSED_REQUEST), default: withoutBody(UNEXPECTED_ERROR) }
      : { ...Object.fromEntries(errors.map((status) => [status, responseRef(errorResponseName(status))])), '4XX': responseRef('RefusedRequest'), default: responseRef('UnexpectedError') };
    if (method !== 'head') for (const status of errors) errorStatuses.add(status);
    item[method] = {
      ...operation,
      responses: {
        ...Object.fromEntries(Object.entries(operation.responses).map(([status, response]) => [status, withRequestId(response)])),
        ...failures,
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: INFO,
    servers: [{ url: PARTNER_PREFIX, description: 'The partner API, on the host that serves this description.' }],
    security: [{ bearer: [] }],
    tags: [
      ...resources.map((resource) => ({ name: resource.name, description: resource.description })),
      ...Object.entries(OTHER_TAGS).map(([name, description]) => ({ name, description })),
    ],
    paths,
    components: {
      schemas: { ...SCHEMAS },
      parameters: PARAMETERS,
      headers: HEADERS,
      responses: {
        ...Object.fromEntries([...errorStatuses].sort((a, b) => a - b).map((status) => [errorResponseName(status), errorResponse(status)])),
        RefusedRequest: REFUSED_REQUEST,
        UnexpectedError: UNEXPECTED_ERROR,
      },
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

/**
 * Makes the description `app.swagger()`, the hook renderers of it (a reference page) read.
 * @fastify/swagger's static mode serves the document as given; its types predate 3.1 documents.
 */
export const openApi = fp(async (app: FastifyInstance) => {
  await app.register(swagger, { mode: 'static', specification: { document: buildOpenApiDocument() as unknown as OpenAPIV3.Document } });
}, { name: 'openapi' });

/**
 * GET /openapi.json under the prefix it is registered with, and the prefix itself, with or without
 * its trailing slash, redirecting to it: PostgREST answers its root with its description, and a
 * client's base URL is this prefix. Neither needs a token.
 */
export async function openApiDocument(app: FastifyInstance): Promise<void> {
  app.get(OPENAPI_PATH, async () => app.swagger());
  const toDescription = async (_request: FastifyRequest, reply: FastifyReply) => reply.redirect(`${app.prefix}${OPENAPI_PATH}`);
  // One route per form: Fastify adds the slashed form of a prefix's '/' route without running
  // the onRoute hooks, so the methods it serves (src/http/methods.ts) would miss its GET.
  app.get('', toDescription);
  app.get('/', { prefixTrailingSlash: 'slash' }, toDescription);
}
