/**
 * The reusable parts of the OpenAPI description, each read off its source: the row schemas off
 * the registry, the batch rows off the write shapes, the result codes off the row codes, the
 * error codes off the catalogue and the SQLSTATE table, the bounds off LIMITS, the filter
 * operators off the query grammar.
 */
import { STATUS_CODES } from 'node:http';
import type { OpenAPIV3_1 } from 'openapi-types';
import { PostgresError } from 'pg-error-enum';
import { ERRORS, type ErrorCode } from '../../errors.ts';
import { LIMITS } from '../../limits.ts';
import { ftsOperators, isValues, quantifiableOperators, simpleOperators } from '../../query/syntax.ts';
import { type Column, type ColumnType, type Resource, resources, resourcesByName } from '../../resources/registry.ts';
import { WRITABLE_RESOURCES, WRITE_SHAPES, type WritableResource } from '../../resources/write-shapes.ts';
import { ROW_STATUSES } from '../../writes/batch.ts';
import { ROW_CODES } from '../../writes/row-codes.ts';
import { meResponse } from '../me.ts';
import { RATE_LIMIT_HEADERS } from '../rate-limits.ts';
import { passThroughStatus } from '../sqlstates.ts';
import { type JsonSchema, withNull } from '../schemas.ts';
import { type RowRequirement, writeRowSchema } from '../write-schemas.ts';

type Reference = OpenAPIV3_1.ReferenceObject;

export const schemaRef = (name: string): Reference => ({ $ref: `#/components/schemas/${name}` });

const pascalCase = (name: string) => name.split('_').map((word) => word[0].toUpperCase() + word.slice(1)).join('');

/** `students` → `Student`, `campuses` → `Campus`, `universities` → `University`; `alumni` stays. */
const singular = (name: string) => name.replace(/ies$/, 'y').replace(/ses$/, 's').replace(/([^s])s$/, '$1');

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

function rowSchema(resource: Resource): JsonSchema {
  return {
    type: 'object',
    description: `${resource.description} A full row holds every column; \`select\` narrows a row to the columns it names, under their aliases.`,
    required: resource.columns.map((c) => c.name),
    properties: Object.fromEntries(resource.columns.map((c) => [c.name, columnSchema(c)])),
  };
}

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
  description: `${meaning}: \`(<condition>,…)\`, each \`<column>.<operator>.<value>\` or a nested \`and(…)\`, \`or(…)\`, \`not.and(…)\` or \`not.or(…)\`.`,
  schema: { type: 'string', pattern: '^\\(.*\\)$' },
  example: '(email.eq.ada@example.edu,last_name.ilike.*son*)',
});

export const PARAMETERS = {
  select: {
    name: 'select', in: 'query', schema: { type: 'string' }, example: 'id,email,surname:last_name',
    description: `Columns to return, at most ${LIMITS.maxSelectItems} items: \`column\`, \`alias:column\`, JSON paths (\`sections->0->>title\`) and casts (\`column::text\`).`,
  },
  order: {
    name: 'order', in: 'query', schema: { type: 'string' }, example: 'last_name.asc,id.desc.nullslast',
    description: `Sort terms, at most ${LIMITS.maxOrderTerms}: \`column\`, \`.asc\` or \`.desc\`, then \`.nullsfirst\` or \`.nullslast\`.`,
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
      + '`handling=strict` refuses a preference the service does not know (PGRST122).',
  },
  WritePrefer: {
    name: 'Prefer', in: 'header', schema: { type: 'string' }, example: 'tx=rollback',
    description: '`tx=rollback` makes the write a dry run: every row is validated, matched and decided and the answer is the one '
      + 'the write would give, but nothing is kept (created ids are never assigned). `tx=commit` is the default. '
      + '`handling=strict` refuses a preference the service does not know (PGRST122).',
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key', in: 'header', schema: { type: 'string', minLength: 1, maxLength: LIMITS.idempotencyKeyChars, pattern: '^[\\x20-\\x7E]+$' },
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
  'Content-Range': {
    description: '`<first>-<last>/<total>`: the rows of this page, counted from 0, and the total when `Prefer: count` asked for it '
      + '(otherwise `*`); the range is `*` when no row is returned.',
    schema: { type: 'string', pattern: '^(\\d+-\\d+|\\*)/(\\d+|\\*)$' },
  },
  [RATE_LIMIT_HEADERS.limit]: integerHeader('Requests allowed per window (a minute): reads per source address, writes per token.'),
  [RATE_LIMIT_HEADERS.remaining]: integerHeader('Requests left in the current window.'),
  [RATE_LIMIT_HEADERS.reset]: integerHeader('Seconds until the current window ends.'),
  'Preference-Applied': { description: 'The preferences of the Prefer header that were honoured, e.g. `tx=rollback` for a dry run.', schema: { type: 'string' } },
  'Retry-After': integerHeader('Seconds to wait before retrying.'),
  'Idempotent-Replayed': {
    description: '`true`: this is the stored answer of an earlier request with the same `Idempotency-Key`; nothing was written now.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': { description: '`Bearer`: the scheme the service authenticates with.', schema: { type: 'string' } },
} satisfies Record<string, OpenAPIV3_1.HeaderObject>;

export type HeaderName = keyof typeof HEADERS;
/** The rate-limit headers (src/http/rate-limits.ts), as the description names them. */
export const RATE_LIMIT_HEADER_NAMES: readonly HeaderName[] = Object.values(RATE_LIMIT_HEADERS);

export const headerRefs = (names: readonly HeaderName[]): Record<string, Reference> =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

// Errors.

/** PostgreSQL's codes that the SQLSTATE table (src/http/sqlstates.ts) passes to the caller as they are. */
const passedThroughSqlstates = [...new Set<string>(Object.values(PostgresError))]
  .filter((code) => passThroughStatus(code) !== undefined && !Object.hasOwn(ERRORS, code))
  .sort();

const ERROR_SCHEMA: JsonSchema = {
  type: 'object',
  description: 'The body of every error response.',
  required: ['code', 'message', 'details', 'hint'],
  properties: {
    code: {
      type: 'string',
      enum: [...Object.keys(ERRORS), ...passedThroughSqlstates],
      description: 'A code of the service\'s catalogue (docs/api.md, "Errors"), or the SQLSTATE of a PostgreSQL error the '
        + 'request\'s own values caused (a value the column\'s type refuses, an operator the type lacks), as PostgREST passes them on.',
    },
    message: { type: 'string' },
    details: { type: ['string', 'null'] },
    hint: { type: ['string', 'null'] },
  },
};

/** Headers added where the error is raised, beyond the catalogue's own. */
const RAISED_ERROR_HEADERS: Readonly<Partial<Record<number, readonly HeaderName[]>>> = {
  416: ['Content-Range'], // src/http/read-response.ts
  429: ['Retry-After', ...RATE_LIMIT_HEADER_NAMES],
};

const headerNamed = new Map(Object.keys(HEADERS).map((name) => [name.toLowerCase(), name as HeaderName]));

function catalogueHeaders(status: number): HeaderName[] {
  const names = Object.values(ERRORS).filter((d) => d.status === status).flatMap((d) => Object.keys(d.headers ?? {}));
  return [...new Set(names)].map((name) => {
    const documented = headerNamed.get(name);
    if (!documented) throw new Error(`The catalogue's header ${name} has no entry in the OpenAPI HEADERS.`);
    return documented;
  });
}

/** `Bad Request` → `BadRequest`: the name of a status's error response. */
export const errorResponseName = (status: number) => (STATUS_CODES[status] ?? String(status)).replace(/[^A-Za-z]/g, '');

/** The error response of a status: its codes from the catalogue and the SQLSTATE table, with their meanings. */
export function errorResponse(status: number): OpenAPIV3_1.ResponseObject {
  const codes = Object.entries(ERRORS).filter(([, d]) => d.status === status).map(([code, d]) => `\`${code}\`: ${d.when}`);
  const sqlstates = passedThroughSqlstates.some((code) => passThroughStatus(code) === status);
  if (codes.length === 0 && !sqlstates) throw new Error(`No error code answers with status ${status}.`);
  const passedOn = sqlstates ? ['A PostgreSQL SQLSTATE (listed in `Error.code`): a value or operator of the request the column\'s type refuses.'] : [];
  const headers = [...new Set([...catalogueHeaders(status), ...RAISED_ERROR_HEADERS[status] ?? []])];
  return {
    description: [`${STATUS_CODES[status]}.`, ...codes, ...passedOn].join('\n\n'),
    ...(headers.length > 0 ? { headers: headerRefs(headers) } : {}),
    content: { 'application/json': { schema: schemaRef('Error') } },
  };
}

/** What the edge refuses before any route runs (src/http/edge.ts): every operation can meet these. */
const EDGE_ERRORS: readonly ErrorCode[] = ['BAD_REQUEST', 'REQUEST_TIMEOUT', 'EXPECTATION_FAILED', 'HEADERS_TOO_LARGE'];

export const REFUSED_REQUEST: OpenAPIV3_1.ResponseObject = {
  description: ['A request the service refuses whatever its path.', ...EDGE_ERRORS.map((code) => `\`${code}\` (${ERRORS[code].status}): ${ERRORS[code].when}`)].join('\n\n'),
  content: { 'application/json': { schema: schemaRef('Error') } },
};

export const UNEXPECTED_ERROR: OpenAPIV3_1.ResponseObject = {
  description: 'Any other error, such as 500 `INTERNAL`, with the same body.',
  content: { 'application/json': { schema: schemaRef('Error') } },
};

// Batch writes.

/** What a resource's results and response carry beyond what every batch write shares (src/writes/batches.ts). */
interface ResultExtras {
  readonly written: Readonly<Record<string, JsonSchema>>;
  readonly writtenRequired: readonly string[];
  readonly response: Readonly<Record<string, JsonSchema>>;
}

const RESULT_EXTRAS: Record<WritableResource, ResultExtras> = {
  students: {
    written: {
      cohort_id: { ...withNull({ type: 'string', format: 'uuid' }), description: 'The cohort the student is in.' },
      notes: {
        type: 'array', items: { type: 'string' },
        description: 'Present when something was accepted but not applied as sent: `is_alumni` disagrees with `graduation_date`, '
          + 'or a changed email was recorded as a secondary address.',
      },
    },
    writtenRequired: ['cohort_id'],
    response: {
      cohorts_created: { type: 'integer', description: 'Always 0: a student write never creates a cohort.' },
      invitations_sent: { type: 'integer', description: 'Always 0: no invitation is sent.' },
    },
  },
  cohorts: { written: {}, writtenRequired: [], response: {} },
};

function batchSchemas(resource: WritableResource): Record<string, JsonSchema> {
  const shape = WRITE_SHAPES[resource];
  const names = writeSchemaNames(resource);
  const extras = RESULT_EXTRAS[resource];
  const codes = ROW_CODES[resource];
  const requirements: RowRequirement[] = ['create', 'patch'];
  return {
    ...Object.fromEntries(requirements.flatMap((requirement) => [
      [names.row(requirement), writeRowSchema(shape, requirement)],
      [names.batch(requirement), {
        type: 'object',
        required: [resource],
        properties: { [resource]: { type: 'array', maxItems: LIMITS.batchRows, items: schemaRef(names.row(requirement)) } },
      }],
    ])),
    [names.written]: {
      type: 'object',
      description: 'A row that was written, or matched and left unchanged.',
      required: [shape.key, 'status', 'id', ...extras.writtenRequired],
      properties: {
        [shape.key]: { type: 'string', description: `The \`${shape.key}\` as sent: match results back to your records with it.` },
        status: { type: 'string', enum: ROW_STATUSES.filter((s) => s !== 'rejected') },
        id: { type: 'string', format: 'uuid' },
        ...extras.written,
      },
    },
    [names.rejected]: {
      type: 'object',
      description: 'A row that was not written; nothing of it was saved.',
      required: [shape.key, 'status', 'code', 'message'],
      properties: {
        [shape.key]: { type: ['string', 'null'], description: `The \`${shape.key}\` as sent; null when the row carried none (or not a string).` },
        status: { const: 'rejected' },
        code: {
          type: 'string',
          enum: Object.keys(codes),
          description: Object.entries(codes).map(([code, when]) => `\`${code}\`: ${when}`).join('\n\n'),
        },
        message: { type: 'string' },
      },
    },
    [names.result]: {
      type: 'object',
      description: 'HTTP 200 means the batch was processed, not that every row was written: read `results`.',
      required: ['counts', ...Object.keys(extras.response), 'dropped_fields', 'results'],
      properties: {
        counts: schemaRef('BatchCounts'),
        ...extras.response,
        dropped_fields: {
          type: 'array', items: { type: 'string' },
          description: 'Keys sent in any row that the record does not hold, sorted; they were not saved.',
        },
        results: {
          type: 'array',
          description: 'One per row sent, in the order sent.',
          items: { oneOf: [schemaRef(names.written), schemaRef(names.rejected)] },
        },
      },
    },
  };
}

const BATCH_COUNTS: JsonSchema = {
  type: 'object',
  description: 'Rows per outcome.',
  required: [...ROW_STATUSES],
  properties: Object.fromEntries(ROW_STATUSES.map((status) => [status, { type: 'integer', minimum: 0 }])),
};

function allSchemas(): Record<string, JsonSchema> {
  const rows = resources.map((resource) => [rowSchemaName(resource), rowSchema(resource)] as const);
  const names = new Set(rows.map(([name]) => name));
  if (names.size !== resources.length) throw new Error('Two resources share a row schema name.');
  return {
    ...Object.fromEntries(rows),
    ...FILTER_SCHEMAS,
    ...Object.assign({}, ...WRITABLE_RESOURCES.map(batchSchemas)),
    BatchCounts: BATCH_COUNTS,
    Me: meResponse,
    Error: ERROR_SCHEMA,
  };
}

export const SCHEMAS: Readonly<Record<string, JsonSchema>> = allSchemas();

export const SECURITY_SCHEMES: Record<string, OpenAPIV3_1.SecuritySchemeObject> = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description: 'A token the operator issues at onboarding: it reads one university, or every member of a consortium; '
      + 'writing needs a write-enabled token of a single university.',
  },
};
