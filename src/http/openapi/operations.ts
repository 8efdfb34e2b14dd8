/**
 * Every operation of the partners' OpenAPI description, in one table: the URL its route serves,
 * the method, the statuses it answers with the error body, and its documentation. A route added
 * under /v1 adds its entry here; test/openapi.test.ts fails while a route and the table disagree.
 */
import type { OpenAPIV3_1 } from 'openapi-types';
import { statusAndCode } from '../../errors.ts';
import { CHANGE_FEED_DEFAULTS, LIMITS } from '../../limits.ts';
import { CURSOR_UNIVERSITIES, FEEDS, type Feed } from '../../query/changes.ts';
import { READ_MEDIA_TYPES, type ReadMediaType, STRIPPED_MEDIA_TYPES, mediaTypeName, mediaTypeWithParameters } from '../../query/media-types.ts';
import { type Resource, resources, resourcesByName } from '../../resources/registry.ts';
import { WRITABLE_RESOURCES, WRITE_SHAPES, type WritableResource } from '../../resources/write-shapes.ts';
import { WRITE_MODES, type WriteMode } from '../../writes/batch.ts';
import { feedPath } from '../change-routes.ts';
import { ME_PATH } from '../me.ts';
import { HEALTH_PATHS, OPENAPI_PATH, PARTNER_PREFIX } from '../prefixes.ts';
import { RESPONSE_HEADERS } from '../response-headers.ts';
import type { JsonSchema } from '../schemas.ts';
import { REQUIREMENT_DESCRIPTIONS, rowRequirement } from '../write-schemas.ts';
import { changePageSchemaName } from './change-schemas.ts';
import {
  type ParameterName, RATE_LIMIT_HEADER_NAMES, filterParameter, headerRefs, parameterRef, resourceTitle, rowSchemaName, schemaRef, writeSchemaNames,
} from './components.ts';

/** The tags of the operations that are not about a resource (each resource is a tag of its own). */
export const OTHER_TAGS = {
  changes: 'The change feed: what was created, updated and erased among students and cohorts since a cursor.',
  token: 'The calling token.',
  service: 'The service itself: its probes and this description.',
} as const;

export interface DocumentedOperation {
  readonly method: 'get' | 'head' | 'put' | 'post' | 'patch';
  /** The URL the route is served at. */
  readonly url: string;
  /** The statuses it answers with the error body; any other error is the `default` response. */
  readonly errors: readonly number[];
  readonly operation: OpenAPIV3_1.OperationObject & {
    operationId: string;
    tags: [resource: string] | [keyof typeof OTHER_TAGS];
    responses: OpenAPIV3_1.ResponsesObject;
  };
}

const READ_PARAMETERS: readonly ParameterName[] = ['select', 'order', 'limit', 'offset', 'or', 'and', 'not.or', 'not.and', 'Range', 'Prefer'];

/** What a read answers in each media type it can render (src/query/media-types.ts), nulls stripped or not. */
function readContent(row: OpenAPIV3_1.ReferenceObject): Record<string, OpenAPIV3_1.MediaTypeObject> {
  const schemas: Record<ReadMediaType, OpenAPIV3_1.SchemaObject | OpenAPIV3_1.ReferenceObject> = {
    json: { type: 'array', items: row },
    singular: row,
    csv: { type: 'string', description: 'RFC 4180 CSV: a header row naming the selected columns, then a line per row.' },
  };
  const stripped = (Object.keys(STRIPPED_MEDIA_TYPES) as (keyof typeof STRIPPED_MEDIA_TYPES)[])
    .map((type) => [mediaTypeWithParameters(STRIPPED_MEDIA_TYPES[type]), { schema: schemas[type] }]);
  return Object.fromEntries([
    ...(Object.keys(schemas) as ReadMediaType[]).map((type) => [mediaTypeName(READ_MEDIA_TYPES[type]), { schema: schemas[type] }]),
    ...stripped,
  ]);
}

/** The headers of a read's page: its range, the rate limit's, and the count preference honoured. */
const PAGE_HEADERS = headerRefs([RESPONSE_HEADERS.contentRange, RESPONSE_HEADERS.contentLocation, ...RATE_LIMIT_HEADER_NAMES, RESPONSE_HEADERS.preferenceApplied]);

function readOperation(resource: Resource): DocumentedOperation {
  const row = schemaRef(rowSchemaName(resource));
  const page = (description: string): OpenAPIV3_1.ResponseObject => ({ description, headers: PAGE_HEADERS, content: readContent(row) });
  return {
    method: 'get',
    url: `${PARTNER_PREFIX}/${resource.name}`,
    errors: [400, 401, 404, 406, 414, 416, 429, 503],
    operation: {
      operationId: `list${resourceTitle(resource)}`,
      tags: [resource.name],
      summary: `List ${resource.name.replaceAll('_', ' ')}`,
      description: `${resource.description}\n\nPostgREST's query language: a filter parameter per column, \`or\`/\`and\` trees, `
        + '`select`, `order`, `limit`/`offset` or the `Range` header, and `Prefer: count`. '
        + `\`Accept: ${mediaTypeName(READ_MEDIA_TYPES.singular)}\` answers the one matching row as an object (${statusAndCode('PGRST116')} unless exactly one matches), `
        + `\`Accept: text/csv\` answers CSV, and an Accept naming none of these nor JSON is refused ${statusAndCode('PGRST107')}. `
        + `\`Accept: ${mediaTypeWithParameters(STRIPPED_MEDIA_TYPES.json)}\` (or the single object's type with \`;nulls=stripped\`) leaves out every member whose value is null. `
        + '`HEAD` answers the same status and headers without a body.',
      parameters: [...READ_PARAMETERS.map(parameterRef), ...resource.columns.map(filterParameter)],
      responses: {
        200: page('The rows, a bare JSON array.'),
        206: page('Part of a total counted with `Prefer: count`: Content-Range says which rows of how many.'),
      },
    },
  };
}

const RANGE_PARAMETER = parameterRef('Range').$ref;

/**
 * A GET without its body: every GET route answers HEAD (the reads and the change feeds declare
 * it, src/http/read-routes.ts and src/http/change-routes.ts; Fastify generates the others') with
 * the GET's status and headers,
 * e.g. a read's total counted with `Prefer: count=exact` in Content-Range. It takes the GET's
 * parameters but the Range header, which applies to GET only, as in PostgREST (src/query/read-request.ts).
 */
function headOperation(get: DocumentedOperation): DocumentedOperation {
  const { operationId, summary, responses, parameters, ...rest } = get.operation;
  const { path } = describedPath(get.url);
  const headParameters = parameters?.filter((parameter) => !('$ref' in parameter && parameter.$ref === RANGE_PARAMETER));
  return {
    ...get,
    method: 'head',
    operation: {
      ...rest,
      ...(headParameters ? { parameters: headParameters } : {}),
      operationId: operationId.replace(/^(list|get)/, 'head'),
      summary: `${summary}: headers only`,
      description: `\`GET ${path}\` answered with its status and headers, without a body${headParameters?.length !== parameters?.length ? ' (the `Range` header applies to GET only)' : ''}.`,
      responses: Object.fromEntries(Object.entries(responses).map(([status, response]) => [status, withoutBody(response as OpenAPIV3_1.ResponseObject)])),
    },
  };
}

/** A URL as the description names it: under the partner API's server, or at the root. */
export function describedPath(url: string): { path: string; partner: boolean } {
  const partner = url.startsWith(`${PARTNER_PREFIX}/`);
  return { path: partner ? url.slice(PARTNER_PREFIX.length) : url, partner };
}

/** A response as HEAD answers it: its description and headers. */
export const withoutBody = ({ description, headers }: OpenAPIV3_1.ResponseObject): OpenAPIV3_1.ResponseObject =>
  ({ description, ...(headers ? { headers } : {}) });

interface WriteMethod {
  readonly verb: 'upsert' | 'create' | 'update';
  readonly meaning: string;
}

const WRITE_METHODS: Record<WriteMode, WriteMethod> = {
  put: { verb: 'upsert', meaning: 'Upsert: creates what is missing and updates what changed; safe to replay.' },
  post: { verb: 'create', meaning: 'Create only: a row matching an existing record is rejected `ALREADY_EXISTS`.' },
  patch: { verb: 'update', meaning: 'Update only, never creates: a row matching nothing is rejected `NOT_FOUND`; null clears an optional field.' },
};

function writeOperation(resource: WritableResource, mode: WriteMode): DocumentedOperation {
  const { verb, meaning } = WRITE_METHODS[mode];
  const names = writeSchemaNames(resource);
  const requirement = rowRequirement(WRITE_SHAPES[resource], mode);
  return {
    method: mode,
    url: `${PARTNER_PREFIX}/${resource}`,
    errors: [400, 401, 403, 406, 409, 413, 415, 422, 429, 503],
    operation: {
      operationId: `${verb}${resourceTitle(resourcesByName.get(resource)!)}`,
      tags: [resource],
      summary: `${verb[0].toUpperCase()}${verb.slice(1)} ${resource}`,
      description: `${meaning} ${REQUIREMENT_DESCRIPTIONS[requirement](WRITE_SHAPES[resource].key)}\n\nAt most ${LIMITS.batchRows} rows per request (over it: ${statusAndCode('BATCH_TOO_LARGE')}, nothing written). `
        + 'HTTP 200 means the batch was processed, not that every row was written: read `results`. '
        + '`Prefer: tx=rollback` is a dry run: the same answer, nothing written. '
        + 'With an `Idempotency-Key`, a retry after a lost answer gets the first answer back instead of writing again.',
      parameters: [parameterRef('WritePrefer'), parameterRef('Idempotency-Key')],
      requestBody: { required: true, content: { 'application/json': { schema: schemaRef(names.batch(requirement)) } } },
      responses: {
        200: {
          description: 'The batch was processed; each row has its outcome in `results`, in the order sent.',
          headers: headerRefs([...RATE_LIMIT_HEADER_NAMES, RESPONSE_HEADERS.preferenceApplied, RESPONSE_HEADERS.idempotentReplayed]),
          content: { 'application/json': { schema: schemaRef(names.result) } },
        },
      },
    },
  };
}

const ME_OPERATION: DocumentedOperation = {
  method: 'get',
  url: `${PARTNER_PREFIX}/${ME_PATH}`,
  errors: [401, 406, 429, 503],
  operation: {
    operationId: 'getMe',
    tags: ['token'],
    summary: 'The calling token: scope, write permission, expiry and limits',
    description: 'What the bearer token is: its scope with the universities it covers, whether it can write, when it expires, '
      + 'and the limits that apply to it. Never the token itself. Counts against the read rate limit.',
    responses: {
      200: {
        description: 'The calling token.',
        headers: headerRefs(RATE_LIMIT_HEADER_NAMES),
        content: { 'application/json': { schema: schemaRef('Me') } },
      },
    },
  },
};

const FEED_PARAMETERS: OpenAPIV3_1.ParameterObject[] = [
  {
    name: 'since', in: 'query', required: false, schema: { type: 'string' },
    description: 'The `next_cursor` of the previous page of the same feed, unchanged. Left out: from the start, every row as it is now. '
      + `A consortium's cursor holds a position for each member that changed: up to ${CURSOR_UNIVERSITIES} fit in the query string.`,
  },
  {
    name: 'limit', in: 'query', required: false,
    schema: { type: 'integer', minimum: 1, maximum: LIMITS.changesPerResponse, default: CHANGE_FEED_DEFAULTS.pageChanges },
    description: 'The most entries per page. A consortium\'s page may hold fewer while `has_more` is true: follow `has_more`, not the count.',
  },
];

function changesOperation(feed: Feed): DocumentedOperation {
  const what = feed === 'all' ? 'students and cohorts' : feed;
  return {
    method: 'get',
    url: `${PARTNER_PREFIX}${feedPath(feed)}`,
    errors: [400, 401, 406, 414, 429, 503],
    operation: {
      operationId: feed === 'all' ? 'listChanges' : `list${rowSchemaName(resourcesByName.get(feed)!)}Changes`,
      tags: ['changes'],
      summary: `Changes to ${what} since a cursor`,
      description: `What was created, updated and erased among the scope's ${what} since \`since\`, in commit order per university (a consortium's members one after another, in id order), `
        + 'with the cursor for the next call. Each created or updated row appears once, as it is now; an erased row is a tombstone with '
        + 'its id alone. Replaying the feed from the start and applying every entry gives exactly what a full read shows. '
        + 'Call again with `next_cursor` while `has_more` is true, then store the cursor until the next sync: cursors do not expire, '
        + `tombstones are kept indefinitely. A malformed cursor, one of another feed, or one holding a position this database never gave out (forged, or from before a restore from backup) is ${statusAndCode('INVALID_CURSOR')}. `
        + 'Counts against the read rate limit.',
      parameters: FEED_PARAMETERS,
      responses: {
        200: {
          description: 'A page of changes.',
          headers: headerRefs(RATE_LIMIT_HEADER_NAMES),
          content: { 'application/json': { schema: schemaRef(changePageSchemaName(feed)) } },
        },
      },
    },
  };
}

const statusBody = (status: string): JsonSchema => ({ type: 'object', required: ['status'], properties: { status: { type: 'string', const: status } } });

/** The probes (served at the root, without a token) and this description. */
const SERVICE_OPERATIONS: readonly DocumentedOperation[] = [
  {
    method: 'get',
    url: HEALTH_PATHS.live,
    errors: [],
    operation: {
      operationId: 'getLiveness',
      tags: ['service'],
      summary: 'Liveness probe',
      description: 'The process answers; the store is not consulted. Served at the root, not under /v1, and needs no token.',
      security: [],
      responses: { 200: { description: 'Alive.', content: { 'application/json': { schema: statusBody('ok') } } } },
    },
  },
  {
    method: 'get',
    url: HEALTH_PATHS.ready,
    errors: [503],
    operation: {
      operationId: 'getReadiness',
      tags: ['service'],
      summary: 'Readiness probe',
      description: 'The store answers in time and is migrated. Served at the root, not under /v1, and needs no token.',
      security: [],
      responses: { 200: { description: 'Ready to serve.', content: { 'application/json': { schema: statusBody('ready') } } } },
    },
  },
  {
    method: 'get',
    url: `${PARTNER_PREFIX}${OPENAPI_PATH}`,
    errors: [],
    operation: {
      operationId: 'getOpenApiDescription',
      tags: ['service'],
      summary: 'This OpenAPI description',
      description: 'Needs no token.',
      security: [],
      responses: { 200: { description: 'The OpenAPI 3.1 description of the partner API.', content: { 'application/json': { schema: { type: 'object' } } } } },
    },
  },
  {
    method: 'get',
    url: `${PARTNER_PREFIX}/`,
    errors: [],
    operation: {
      operationId: 'getApiRoot',
      tags: ['service'],
      summary: 'The API\'s base URL',
      description: `Redirects to this description (\`${PARTNER_PREFIX}${OPENAPI_PATH}\`), as PostgREST answers its root with its description; \`${PARTNER_PREFIX}\` without the slash too. Needs no token.`,
      security: [],
      responses: {
        302: {
          description: 'Found: the description is at Location.',
          headers: { Location: { description: 'The description\'s path.', schema: { type: 'string', enum: [`${PARTNER_PREFIX}${OPENAPI_PATH}`] } } },
        },
      },
    },
  },
];

const OPERATIONS_WITH_BODIES: readonly DocumentedOperation[] = [
  ...resources.map(readOperation),
  ...WRITABLE_RESOURCES.flatMap((resource) => WRITE_MODES.map((mode) => writeOperation(resource, mode))),
  ...FEEDS.map(changesOperation),
  ME_OPERATION,
  ...SERVICE_OPERATIONS,
];

export const OPERATIONS: readonly DocumentedOperation[] = [
  ...OPERATIONS_WITH_BODIES,
  ...OPERATIONS_WITH_BODIES.filter((operation) => operation.method === 'get').map(headOperation),
];
