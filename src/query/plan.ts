/**
 * Plan: syntax tree + registry → typed plan. Every name is resolved to a registry column here,
 * so the SQL builder only ever writes identifiers the registry holds. Also settles the page to
 * read from `limit`, `offset` and the Range header, and the media type from the Accept header,
 * as PostgREST does, refusing in its order (planRead).
 */
import { ApiError, apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { Column, Resource } from '../resources/registry.ts';
import { type ReadRepresentation, negotiateRead } from './media-types.ts';
import { checkFieldNesting, checkSearchTerms, checkValueNesting } from './nesting.ts';
import { PATTERN_OPERATORS, checkPattern } from './patterns.ts';
import type { Condition, CountPreference, FieldRef, JsonStep, Operation, ReadSyntax } from './syntax.ts';

export interface PlannedField {
  readonly column: Column;
  readonly jsonPath: readonly JsonStep[];
}

export type PlannedCondition =
  | { readonly kind: 'filter'; readonly field: PlannedField; readonly negated: boolean; readonly operation: Operation }
  | { readonly kind: 'tree'; readonly op: 'and' | 'or'; readonly negated: boolean; readonly children: readonly PlannedCondition[] };

export interface OutputColumn {
  readonly key: string;
  readonly field: PlannedField;
  /** SQL type name from the cast allow-list. */
  readonly cast: string | null;
}

export interface PlannedOrder {
  readonly field: PlannedField;
  readonly direction: 'asc' | 'desc' | null;
  readonly nulls: 'first' | 'last' | null;
}

/** A read, ready to be built into statements; answered in the representation the Accept header chose. */
export interface ReadPlan extends ReadRepresentation {
  readonly resource: Resource;
  /**
   * Where the rows are read from: the resource's table when the plan names none of its derived
   * columns, else its read view. A read of one table is what Citus can plan on its fast path (no
   * view's subqueries to plan): one university's cheap page in its read transaction on the node
   * holding its shard, aggregated, 2,266/s from the view and 3,234/s from the table; 4,558/s from
   * the table as rows (src/query/execute.ts sentAsRows) planned for its values (pgbench, 32
   * clients, the transaction pipelined, 100,000 students). On PostgreSQL both run alike (9,844–9,966/s
   * and 9,920/s on reader sessions): its planner drops the view's unused join itself.
   */
  readonly relation: string;
  readonly output: readonly OutputColumn[];
  readonly conditions: readonly PlannedCondition[];
  readonly order: readonly PlannedOrder[];
  /** Rows to skip (exact, as ReadSyntax.offset) and rows to return at most; `limit` is already capped. */
  readonly page: { readonly offset: bigint; readonly limit: number };
  readonly count: CountPreference | null;
  readonly preferenceApplied: readonly string[];
  readonly canonicalQuery: string;
}

/** The types a `select` cast may name, and the SQL each stands for. */
const CAST_TYPES: Readonly<Record<string, string>> = {
  text: 'text', varchar: 'varchar', int: 'integer', int2: 'smallint', int4: 'integer', int8: 'bigint',
  integer: 'integer', smallint: 'smallint', bigint: 'bigint', numeric: 'numeric', real: 'real', float4: 'real',
  float8: 'double precision', 'double precision': 'double precision', bool: 'boolean', boolean: 'boolean',
  date: 'date', time: 'time', timestamp: 'timestamp', timestamptz: 'timestamptz', uuid: 'uuid', json: 'json',
  jsonb: 'jsonb', _text: 'text[]', _int4: 'integer[]', _uuid: 'uuid[]',
};

/** The types every value converts to: a cast to them never fails on a row. */
const INFALLIBLE_CASTS: ReadonlySet<string> = new Set([CAST_TYPES.text, CAST_TYPES.varchar]);

/** Whether an output's cast may fail on some row (`phone::int` of `+44…`), where its select names one. */
export const castCanFail = (output: OutputColumn): boolean => output.cast !== null && !INFALLIBLE_CASTS.has(output.cast);

function resolveField(resource: Resource, field: FieldRef): PlannedField {
  const column = resource.columnsByName.get(field.name);
  if (!column) {
    throw apiError('42703', resource.name, field.name, resource.columns.map((c) => c.name));
  }
  checkFieldNesting(field);
  return { column, jsonPath: field.jsonPath };
}

function planCondition(resource: Resource, condition: Condition): PlannedCondition {
  if (condition.kind === 'tree') {
    return { ...condition, children: condition.children.map((c) => planCondition(resource, c)) };
  }
  const { operation } = condition;
  // The column first: an unknown one is 42703 whatever its pattern, as PostgreSQL would answer.
  const field = resolveField(resource, condition.field);
  if (operation.kind === 'compare' && PATTERN_OPERATORS.has(operation.op)) {
    checkPattern(operation.op, operation.value, operation.quantifier !== null);
  }
  checkValueNesting(field.column, condition.field, operation);
  return { kind: 'filter', field, negated: condition.negated, operation: condition.operation };
}

/**
 * A selected field's key without an alias: the last key of its JSON path, or the column's name
 * when the path has none, as PostgREST names it (`sections->0->items->1` is `items`).
 */
function outputKey(field: FieldRef): string {
  return field.jsonPath.findLast((step) => !step.isIndex)?.key ?? field.name;
}

/** Every column of the resource under its own name: `select=*`, and the row of a change feed entry. */
export const wholeRowOutput = (resource: Resource): OutputColumn[] =>
  resource.columns.map((column) => ({ key: column.name, field: { column, jsonPath: [] }, cast: null }));

function planOutput(resource: Resource, syntax: ReadSyntax): OutputColumn[] {
  const output: OutputColumn[] = [];
  for (const item of syntax.select) {
    if (item.kind === 'star') {
      output.push(...wholeRowOutput(resource));
      continue;
    }
    let cast: string | null = null;
    if (item.cast !== null) {
      const type = item.cast.toLowerCase();
      // An own property only: `constructor` or `__proto__` must not name a type.
      cast = Object.hasOwn(CAST_TYPES, type) ? CAST_TYPES[type] : null;
      if (cast === null) {
        throw apiError('42704', item.cast, Object.keys(CAST_TYPES));
      }
    }
    output.push({ key: item.alias ?? outputKey(item.field), field: resolveField(resource, item.field), cast });
  }
  if (output.length > LIMITS.maxOutputColumns) throw apiError('QUERY_TOO_COMPLEX', `select yields more than ${LIMITS.maxOutputColumns} columns`);
  return output;
}

/** PostgreSQL's largest bigint: the largest offset it takes, and the largest row count. */
export const BIGINT_MAX = 2n ** 63n - 1n;

/** PostgREST's details for a range that limit and offset leave empty, a negative limit included. */
const NEGATIVE_LIMIT = 'Limit should be greater than or equal to zero.';

/** PostgREST's range arithmetic: the query-string range intersected with the Range header. */
export function planPage(syntax: Pick<ReadSyntax, 'limit' | 'offset' | 'rangeHeader'>): ReadPlan['page'] {
  const header = syntax.rangeHeader;
  if (header && header.last !== null && header.first > header.last) {
    throw apiError('PGRST103', 'The lower boundary must be lower than or equal to the upper boundary in the Range header.');
  }
  if (syntax.limit !== null && syntax.limit < 0n) throw apiError('PGRST103', NEGATIVE_LIMIT);
  if (syntax.limit === 0n) return { offset: 0n, limit: 0 };
  const offset = syntax.offset !== null && syntax.offset > 0n ? syntax.offset : 0n;
  const lower = header !== null && header.first > offset ? header.first : offset;
  // The last row asked for by the query string and by the header, where they bound it.
  const uppers = [syntax.limit === null ? null : offset + syntax.limit - 1n, header?.last ?? null].filter((u) => u !== null);
  const upper = uppers.length === 0 ? null : uppers.reduce((a, b) => (a < b ? a : b));
  // The header's range is not empty (checked above), so only limit and offset leave nothing of
  // it: PostgREST names that case as a negative limit.
  if (upper !== null && lower > upper) throw apiError('PGRST103', NEGATIVE_LIMIT);
  const rows = upper === null ? null : upper - lower + 1n;
  return { offset: lower, limit: rows === null || rows > BigInt(LIMITS.rowsPerResponse) ? LIMITS.rowsPerResponse : Number(rows) };
}

/** The columns a condition names, its tree's included. */
const conditionColumns = (condition: PlannedCondition): Column[] =>
  (condition.kind === 'tree' ? condition.children.flatMap(conditionColumns) : [condition.field.column]);

/**
 * Refuses in PostgREST's order, which runs its request's checks, then its plan's, then the
 * statement: the page (416), a parameter on an embed (PGRST108), the Accept header (406), a
 * preference not applied under `handling=strict` (PGRST122), then what PostgreSQL refuses there:
 * names and casts (42703, 42704), values, and an offset past bigint (22003).
 */
export function planRead(resource: Resource, syntax: ReadSyntax): ReadPlan {
  const page = planPage(syntax);
  const firstEmbed = syntax.embedReferences[0];
  if (firstEmbed) throw apiError('PGRST108', firstEmbed.path[0], firstEmbed.parameter);
  const representation = negotiateRead(syntax.acceptHeader);
  if (syntax.refusedPreferences.length > 0) throw apiError('PGRST122', syntax.refusedPreferences);
  const output = planOutput(resource, syntax);
  const conditions = syntax.conditions.map((c) => planCondition(resource, c));
  checkSearchTerms(syntax.conditions);
  const order = syntax.order.map((term) => ({ ...term, field: resolveField(resource, term.field) }));
  const named = [...output.map((o) => o.field.column), ...conditions.flatMap(conditionColumns), ...order.map((o) => o.field.column)];
  // PostgreSQL's own refusal of such an OFFSET, whichever statement the page would run first.
  if (page.offset > BIGINT_MAX) throw new ApiError(400, '22003', `value "${page.offset}" is out of range for type bigint`);
  return {
    resource,
    relation: named.some((column) => column.derived) ? resource.relation : resource.table,
    output,
    conditions,
    order,
    page,
    count: syntax.count,
    preferenceApplied: syntax.preferenceApplied,
    canonicalQuery: syntax.canonicalQuery,
    ...representation,
  };
}
