/**
 * The reusable parts of the OpenAPI description that reads and every operation share, each read
 * off its source: schema names and references, the row schemas off the registry, the filter
 * operators off the query grammar, the read parameters, the response headers and the security
 * scheme. Batch writes are in batch-schemas.ts, error responses in error-responses.ts.
 */
import type { OpenAPIV3_1 } from 'openapi-types';
import { IDEMPOTENCY_KEY_CHARACTER } from '../../domain/idempotency-keys.ts';
import { LIMITS } from '../../limits.ts';
import { ftsOperators, isValues, quantifiableOperators, simpleOperators } from '../../query/syntax.ts';
import { type Column, type ColumnType, type Resource, resources, resourcesByName } from '../../resources/registry.ts';
import type { WritableResource } from '../../resources/write-shapes.ts';
import { SAFE_REQUEST_ID } from '../edge.ts';
import { RATE_LIMIT_HEADERS } from '../rate-limits.ts';
import { MAX_CONTENT_LOCATION_BYTES } from '../read-response.ts';
import { RESPONSE_HEADERS } from '../response-headers.ts';
import { type JsonSchema, withNull } from '../schemas.ts';
import type { RowRequirement } from '../write-schemas.ts';

type Reference = OpenAPIV3_1.ReferenceObject;

/** What every Prefer header takes besides its own preferences (src/query/preferences.ts). */
const PREFER_HANDLING = '`timezone=UTC`, the zone of every timestamp, is honoured; `handling=strict` refuses a preference the service '
  + 'does not know or does not apply, another time zone among them (PGRST122).';

export const schemaRef = (name: string): Reference => ({ $ref: `#/components/schemas/${name}` });

const pascalCase = (name: string) => name.split('_').map((word) => word[0].toUpperCase() + word.slice(1)).join('');

/** `students` → `Student`, `campuses` → `Campus`, `universities` → `University`; `alumni` stays. One rule applies. */
function singular(name: string): string {
  if (name.endsWith('ies')) return `${name.slice(0, -3)}y`;
  if (name.endsWith('ses')) return name.slice(0, -2);
  return name.replace(/([^s])s$/, '$1');
}

/** The name of a resource in operation ids: `students` → `Students`. */
export const resourceTitle = (resource: Resource) => pascalCase(resource.name);

/** The name of a resource's row schema: `students` → `Student`. */
export const rowSchemaName = (resource: Resource) => singular(resourceTitle(resource));

const writableRowName = (resource: WritableResource) => rowSchemaName(resourcesByName.get(resource)!);

/** The schema names of a writable resource's bodies and results. */
export const writeSchemaNames = (resource: WritableResource) => {
  const row = writableRowName(resource);
  return {
    row: (requirement: RowRequirement) => `${row}${pascalCase(requirement)}`,
    batch: (requirement: RowRequirement) => `${row}${pascalCase(requirement)}Batch`,
    written: `${row}Written`,
    rejected: `${row}Rejected`,
    result: `${row}BatchResult`,
  };
};

// Read rows.

const COLUMN_SCHEMAS: Record<ColumnType, JsonSchema> = {
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

function columnSchema(column: Column): JsonSchema {
  const notes = [column.description, column.large ? 'Large: leave it out with `select` to keep pages small.' : undefined]
    .filter(Boolean).join(' ');
  const schema: JsonSchema = { ...COLUMN_SCHEMAS[column.type], ...(column.enum ? { enum: [...column.enum] } : {}) };
  return { ...(column.nullable ? withNull(schema) : schema), ...(notes ? { description: notes } : {}) };
}

const columnSchemas = (resource: Resource): Record<string, JsonSchema> =>
  Object.fromEntries(resource.columns.map((c) => [c.name, columnSchema(c)]));

function rowSchema(resource: Resource): JsonSchema {
  return {
    type: 'object',
    // No column is required: a row holds only what `select` names, so a required list would
    // refuse every narrowed page the service sends.
    description: `${resource.description} A full row holds every column; \`select\` narrows a row to the columns it names, under their aliases, so no column is required.`,
    properties: columnSchemas(resource),
  };
}

/**
 * A row with every column, as the change feed sends one. Its columns are written out with the
 * required list, not added to the read's row schema by `allOf`: openapi-typescript typed such a
 * row `Student & Record<string, never>`, every column still optional and a misspelt one `never`.
 */
export const wholeRowSchema = (resource: Resource): JsonSchema => ({
  type: 'object',
  description: `${resource.description} Every column.`,
  required: resource.columns.map((c) => c.name),
  properties: columnSchemas(resource),
});

// Filters: one grammar for every column's query parameter.

const FILTER_OPERATOR = `(?:${[...simpleOperators, 'in', 'is'].join('|')}|(?:${quantifiableOperators.join('|')})(?:\\((?:any|all)\\))?|(?:${ftsOperators.join('|')})(?:\\([^)]*\\))?)`;

const FILTER_SCHEMAS: Record<'FilterCondition' | 'Filter', JsonSchema> = {
  FilterCondition: {
    type: 'string',
    pattern: `^(?:not\\.)?${FILTER_OPERATOR}\\.`,
    description: '`<operator>.<value>`, optionally after `not.`. Operators: '
      + `${[...quantifiableOperators, ...simpleOperators].join(', ')} (the first ${quantifiableOperators.length} also as \`<operator>(any)\` and \`<operator>(all)\` with a \`{a,b}\` list); `
      + `\`in.(a,b)\`; \`is.\` with ${isValues.join(', ')}; full-text ${ftsOperators.join(', ')}, optionally with a configuration, as in \`fts(english).word\`.`,
    examples: ['eq.ada@example.edu', 'in.(Fall,Spring)', 'is.null', 'not.ilike.*son*', 'gte.2024-01-01'],
  },
  Filter: {
    description: 'Conditions on the column the query parameter is named after. Send several (an array: the parameter '
      + 'repeated) for a range on one column; every condition must hold.',
    anyOf: [schemaRef('FilterCondition'), { type: 'array', minItems: 1, items: schemaRef('FilterCondition') }],
  },
};

/** The query parameter filtering on one column. */
export const filterParameter = (column: Column): OpenAPIV3_1.ParameterObject => ({
  name: column.name,
  in: 'query',
  description: `Filter on \`${column.name}\` (${column.type}${column.nullable ? ', nullable' : ''}).`,
  schema: schemaRef('Filter'),
  style: 'form',
  explode: true,
});

// The parameters every read takes.

const logicTree = (name: string, meaning: string): OpenAPIV3_1.ParameterObject => ({
  name,
  in: 'query',
  description: `${meaning}: \`(<condition>,…)\`, each \`<column>.<operator>.<value>\` or a nested \`and(…)\`, \`or(…)\`, \`not.and(…)\` or \`not.or(…)\`; `
    + 'on students, say, `(email.eq.ada@example.edu,last_name.ilike.*son*)`.',
  schema: { type: 'string', pattern: '^\\(.*\\)$' },
});

export const PARAMETERS = {
  select: {
    name: 'select', in: 'query', schema: { type: 'string' },
    description: `Columns to return, at most ${LIMITS.maxSelectItems} items: \`column\`, \`alias:column\`, JSON paths (\`sections->0->>title\`) and casts (\`column::text\`); `
      + 'on students, say, `id,email,surname:last_name`. A cast column is sent in the type cast to, not in the row schema\'s.',
  },
  order: {
    name: 'order', in: 'query', schema: { type: 'string' },
    description: `Sort terms, at most ${LIMITS.maxOrderTerms}: \`column\`, \`.asc\` or \`.desc\`, then \`.nullsfirst\` or \`.nullslast\`; on students, say, \`last_name.asc,id.desc.nullslast\`.`,
  },
  limit: {
    name: 'limit', in: 'query', schema: { type: 'integer', minimum: 0 },
    description: `Rows to return at most; a larger value is cut to ${LIMITS.rowsPerResponse}, and without it a page holds at most ${LIMITS.rowsPerResponse} rows.`,
  },
  offset: {
    name: 'offset', in: 'query', schema: { type: 'integer', minimum: 0 },
    description: 'Rows to skip. Past an offset of about 5,000, page by keyset instead: `id=gt.<last id>&order=id.asc`.',
  },
  or: logicTree('or', 'At least one condition holds'),
  and: logicTree('and', 'Every condition holds'),
  'not.or': logicTree('not.or', 'No condition holds'),
  'not.and': logicTree('not.and', 'Not every condition holds'),
  Range: {
    name: 'Range', in: 'header', schema: { type: 'string', pattern: '^\\d+-\\d*$' }, example: '0-24',
    description: '`<first>-<last>` or `<first>-`, rows counted from 0: an alternative to `limit` and `offset` (both together give their intersection).',
  },
  Prefer: {
    name: 'Prefer', in: 'header', schema: { type: 'string' }, example: 'count=exact',
    description: '`count=exact` (or `planned`, `estimated`) puts the total in Content-Range, and a partial page answers 206. '
      + PREFER_HANDLING,
  },
  WritePrefer: {
    name: 'Prefer', in: 'header', schema: { type: 'string' }, example: 'tx=rollback',
    description: '`tx=rollback` makes the write a dry run: every row is validated, matched and decided and the answer is the one '
      + 'the write would give, but nothing is kept (created ids are never assigned). `tx=commit` is the default. '
      + PREFER_HANDLING,
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key', in: 'header', schema: { type: 'string', minLength: 1, maxLength: LIMITS.idempotencyKeyChars, pattern: `^${IDEMPOTENCY_KEY_CHARACTER}+$` },
    example: '5f0c6a2e-8d1b-4c7e-9a3f-1b2c3d4e5f60',
    description: `Makes a retry safe: the first request with a key is processed and its answer kept for ${LIMITS.idempotencyKeySeconds / 3600} hours, `
      + 'per token; a repeat with the same method, resource, Prefer and body gets that answer back (with `Idempotent-Replayed: true`) and '
      + 'writes nothing; the same key with another request is 422 `IDEMPOTENCY_KEY_REUSED`; a repeat while the first runs is 409 '
      + '`IDEMPOTENCY_KEY_IN_USE` with Retry-After. Only processed batches (200) are kept: a refused or failed request frees its key. '
      + 'A dry run (`Prefer: tx=rollback`) keeps nothing.',
  },
} satisfies Record<string, OpenAPIV3_1.ParameterObject>;

export type ParameterName = keyof typeof PARAMETERS;
export const parameterRef = (name: ParameterName): Reference => ({ $ref: `#/components/parameters/${name}` });

// Response headers.

const integerHeader = (description: string): OpenAPIV3_1.HeaderObject => ({ description, schema: { type: 'integer', minimum: 0 } });

export const HEADERS = {
  [RESPONSE_HEADERS.contentRange]: {
    description: '`<first>-<last>/<total>`: the rows of this page, counted from 0, and the total when `Prefer: count` asked for it '
      + '(otherwise `*`); the range is `*` when no row is returned.',
    schema: { type: 'string', pattern: '^(\\d+-\\d+|\\*)/(\\d+|\\*)$' },
  },
  [RESPONSE_HEADERS.contentLocation]: {
    description: 'The page read: its path and its query parameters in key order (PostgREST\'s canonical form), each as sent; '
      + `left out when longer than ${MAX_CONTENT_LOCATION_BYTES.toLocaleString('en')} bytes.`,
    schema: { type: 'string' },
  },
  [RATE_LIMIT_HEADERS.limit]: integerHeader('Requests allowed per window (a minute) by the limit that counted this one: reads per source '
    + 'address, writes per token, and, on a 401, failed authentications per source address.'),
  [RATE_LIMIT_HEADERS.remaining]: integerHeader('Requests left in the current window.'),
  [RATE_LIMIT_HEADERS.reset]: integerHeader('Seconds until the current window ends.'),
  [RESPONSE_HEADERS.preferenceApplied]: { description: 'The preferences of the Prefer header that were honoured, e.g. `tx=rollback` for a dry run.', schema: { type: 'string' } },
  'Retry-After': integerHeader('Seconds to wait before retrying.'),
  'Accept-Encoding': { description: '`identity`: the one content coding a request body may have; a compressed one is refused.', schema: { type: 'string' } },
  [RESPONSE_HEADERS.idempotentReplayed]: {
    description: '`true`: this is the stored answer of an earlier request with the same `Idempotency-Key`; nothing was written now.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': { description: '`Bearer`: the scheme the service authenticates with.', schema: { type: 'string' } },
  [RESPONSE_HEADERS.requestId]: {
    description: 'The request\'s id: the `X-Request-Id` the client sent when it matches this pattern, else one the service made. '
      + 'Every log line of the request carries it; quote it to support.',
    schema: { type: 'string', pattern: SAFE_REQUEST_ID.source },
  },
  Allow: { description: 'On a 405: the methods the path serves.', schema: { type: 'string' } },
} satisfies Record<string, OpenAPIV3_1.HeaderObject>;

export type HeaderName = keyof typeof HEADERS;
/** The rate-limit headers (src/http/rate-limits.ts), as the description names them. */
export const RATE_LIMIT_HEADER_NAMES: readonly HeaderName[] = Object.values(RATE_LIMIT_HEADERS);

export const headerRefs = (names: readonly HeaderName[]): Record<string, Reference> =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/** The row schemas of every resource and the filter grammar: what reads return and take. */
function readSchemas(): Record<string, JsonSchema> {
  const rows = resources.map((resource) => [rowSchemaName(resource), rowSchema(resource)] as const);
  const names = new Set(rows.map(([name]) => name));
  if (names.size !== resources.length) throw new Error('Two resources share a row schema name.');
  return { ...Object.fromEntries(rows), ...FILTER_SCHEMAS };
}

export const READ_SCHEMAS: Readonly<Record<string, JsonSchema>> = readSchemas();

export const SECURITY_SCHEMES: Record<string, OpenAPIV3_1.SecuritySchemeObject> = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description: 'A token the operator issues at onboarding: it reads one university, or every member of a consortium; '
      + 'writing needs a write-enabled token of a single university.',
  },
};
