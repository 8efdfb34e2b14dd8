/**
 * SQL: plan → parameterised statements. Identifiers come only from the registry (through the
 * plan); every value, JSON key and output key is a bind parameter. Row scoping is row-level
 * security's, inside PostgreSQL; every statement also names the caller's universities in the
 * resource's tenant column (tenantConditionSql), so that on Citus a read of one university is
 * routed to its shard (and a consortium's to its members' shards) instead of asking every shard.
 */
import { arrayLiteral } from '../db/array-literal.ts';
import { Parameters } from '../db/parameters.ts';
import type { ReadMediaType } from './media-types.ts';
import type { Resource } from '../resources/registry.ts';
import { type OutputColumn, type PlannedCondition, type PlannedField, type ReadPlan, castCanFail, wholeRowOutput } from './plan.ts';
import type { ComparisonOperator, FtsOperator, IsValue, Operation } from './syntax.ts';

export interface Statement {
  readonly text: string;
  readonly params: readonly string[];
}

const quoteIdentifier = (name: string) => `"${name.replace(/"/g, '""')}"`;

// Keyed by every operator and value the syntax has, so one without SQL does not compile.
const COMPARISON_SQL: Readonly<Record<ComparisonOperator, string>> = {
  eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=', like: 'LIKE', ilike: 'ILIKE', match: '~', imatch: '~*',
  cs: '@>', cd: '<@', ov: '&&', sl: '<<', sr: '>>', nxr: '&<', nxl: '&>', adj: '-|-', isdistinct: 'IS DISTINCT FROM',
};
const IS_SQL: Readonly<Record<IsValue, string>> = {
  null: 'IS NULL', not_null: 'IS NOT NULL', true: 'IS TRUE', false: 'IS FALSE', unknown: 'IS UNKNOWN',
};
const TSQUERY_FUNCTION: Readonly<Record<FtsOperator, string>> = {
  fts: 'to_tsquery', plfts: 'plainto_tsquery', phfts: 'phraseto_tsquery', wfts: 'websearch_to_tsquery',
};

function fieldSql(field: PlannedField, params: Parameters): string {
  let sql = quoteIdentifier(field.column.name);
  if (field.jsonPath.length === 0) return sql;
  // Non-JSON columns go through to_jsonb, so `tags->>0` works on arrays as in PostgREST.
  if (field.column.type !== 'jsonb') sql = `to_jsonb(${sql})`;
  for (const step of field.jsonPath) {
    sql += `${step.arrow}${params.add(step.key)}::${step.isIndex ? 'integer' : 'text'}`;
  }
  return sql;
}

/** One operation on `field`; a switch over every kind, so a new kind without SQL does not compile. */
function operationSql(field: string, operation: Operation, params: Parameters): string {
  switch (operation.kind) {
    case 'compare': {
      const wildcard = operation.op === 'like' || operation.op === 'ilike';
      const value = params.add(wildcard ? operation.value.replace(/\*/g, '%') : operation.value);
      const operator = COMPARISON_SQL[operation.op];
      return operation.quantifier
        ? `${field} ${operator} ${operation.quantifier.toUpperCase()}(${value})`
        : `${field} ${operator} ${value}`;
    }
    case 'in':
      return `${field} = ANY(${params.add(arrayLiteral(operation.values))})`;
    case 'is':
      return `${field} ${IS_SQL[operation.value]}`;
    case 'fts': {
      const query = TSQUERY_FUNCTION[operation.op];
      if (operation.language === null) return `to_tsvector(${field}) @@ ${query}(${params.add(operation.value)})`;
      const language = `${params.add(operation.language)}::regconfig`;
      return `to_tsvector(${language}, ${field}) @@ ${query}(${language}, ${params.add(operation.value)})`;
    }
  }
}

function conditionSql(condition: PlannedCondition, params: Parameters): string {
  const sql = condition.kind === 'tree'
    ? `(${condition.children.map((c) => conditionSql(c, params)).join(condition.op === 'and' ? ' AND ' : ' OR ')})`
    : operationSql(fieldSql(condition.field, params), condition.operation, params);
  return condition.negated ? `NOT ${sql}` : sql;
}

/** The universities a statement reads: the caller's scope (src/db/database.ts). */
export type Tenants = readonly string[];

/**
 * The tenant column naming the caller's universities: `= $n` for one, `= ANY($n)` for several. A
 * page ordered by id keeps the order of the (university_id, id) index with `= ANY`. No university
 * (an empty scope) names none, and reads no row.
 */
function tenantConditionSql(tenantColumn: string, tenants: Tenants, params: Parameters): string {
  const column = quoteIdentifier(tenantColumn);
  if (tenants.length === 1) return `${column} = ${params.add(tenants[0])}::uuid`;
  return tenants.length === 0 ? `${column} = ANY('{}'::uuid[])` : `${column} = ANY(${params.add(arrayLiteral(tenants))}::uuid[])`;
}

/**
 * One university's rows of the relation, under the relation's own name: `tenant = $n`, which
 * PostgreSQL carries into a read view's grouped subqueries (students_read's secondary_emails,
 * cohorts_read's student_count) through its equivalence classes, so that on Citus the read runs
 * on that university's shard; with `= ANY` it asked every shard (EXPLAIN: 32 tasks for three
 * universities). The change feed reads one university at a time through it.
 */
export const universityRelationSql = (relation: string, tenantColumn: string, universityId: string, params: Parameters): string =>
  `(SELECT * FROM ${quoteIdentifier(relation)} WHERE ${tenantConditionSql(tenantColumn, [universityId], params)}) AS ${quoteIdentifier(relation)}`;

/**
 * The plan's relation, its rows of the tenants filtered by the plan's conditions, in one WHERE
 * with the tenants first: with no subquery and one relation, a page of one university is what
 * Citus plans on its fast path (ReadPlan.relation).
 */
function fromWhereSql(plan: ReadPlan, tenants: Tenants, params: Parameters): string {
  const conditions = [tenantConditionSql(plan.resource.tenantColumn.name, tenants, params), ...plan.conditions.map((c) => conditionSql(c, params))];
  return ` FROM ${quoteIdentifier(plan.relation)} WHERE ${conditions.join(' AND ')}`;
}

/** The caller's order, then `id` so that pages never overlap on ties. */
function orderSql(plan: ReadPlan, params: Parameters): string {
  if (plan.order.length === 0) return '';
  const terms = plan.order.map((term) => {
    const direction = term.direction ? ` ${term.direction.toUpperCase()}` : '';
    const nulls = term.nulls ? ` NULLS ${term.nulls.toUpperCase()}` : '';
    return `${fieldSql(term.field, params)}${direction}${nulls}`;
  });
  const ordersById = plan.order.some((t) => t.field.column.name === 'id' && t.field.jsonPath.length === 0);
  if (!ordersById) terms.push(quoteIdentifier('id'));
  return ` ORDER BY ${terms.join(', ')}`;
}

function outputSql(output: OutputColumn, params: Parameters): string {
  const value = fieldSql(output.field, params);
  return output.cast ? `CAST(${value} AS ${output.cast})` : value;
}

/**
 * One row's JSON object, keyed by the output keys (bind parameters, never identifiers): the one
 * shape of a row in a read page and in a change feed entry. `valueOf` names each value when the
 * row's outputs were already selected (pds_page's c0…cn).
 */
export function rowJsonSql(output: readonly OutputColumn[], params: Parameters, valueOf = (o: OutputColumn, _i: number) => outputSql(o, params)): string {
  return `json_build_object(${output.map((o, i) => `${params.add(o.key)}::text, ${valueOf(o, i)}`).join(', ')})`;
}

/**
 * A page row's JSON object, without its null members for `nulls=stripped`: json_strip_nulls, as
 * PostgREST strips them, also from objects nested in a value (a jsonb column's).
 */
const strippedIfAsked = (plan: ReadPlan, json: string) => (plan.nullsStripped ? `json_strip_nulls(${json})` : json);

/** A pds_page row's JSON object, from its columns c0…cn. */
const pageRowJsonSql = (plan: ReadPlan, params: Parameters) => strippedIfAsked(plan, rowJsonSql(plan.output, params, (_, i) => `c${i}`));

/** The page's rows, as columns c0…cn unless `columns` says what each row is. */
function pageSql(plan: ReadPlan, tenants: Tenants, params: Parameters, columns = plan.output.map((o, i) => `${outputSql(o, params)} AS c${i}`).join(', ')): string {
  const fromWhere = fromWhereSql(plan, tenants, params);
  const order = orderSql(plan, params);
  const limit = params.add(String(plan.page.limit));
  const offset = params.add(String(plan.page.offset));
  return `SELECT ${columns}${fromWhere}${order} LIMIT ${limit} OFFSET ${offset}`;
}

const CSV_RECORD_END = `E'\\r\\n'`;

/**
 * One CSV field (RFC 4180) from a text that may be NULL: NULL is the empty field; the empty
 * string is `""`, so the two stay apart (as in PostgreSQL's COPY … CSV); a text holding a
 * comma, a quote, CR or LF is quoted with its quotes doubled.
 */
function csvFieldSql(text: string): string {
  return `coalesce(CASE WHEN ${text} ~ '^$|[",\\r\\n]' THEN '"' || replace(${text}, '"', '""') || '"' ELSE ${text} END, '')`;
}

/** A CSV record of the fields' texts, with its CRLF. */
const csvRecordSql = (texts: readonly string[]) => `concat(${texts.map(csvFieldSql).join(`, ',', `)}, ${CSV_RECORD_END})`;

/** The header record: the output keys (bind parameters) in select order. */
const csvHeaderSql = (plan: ReadPlan, params: Parameters) => csvRecordSql(plan.output.map((o) => `${params.add(o.key)}::text`));

/**
 * One row as a CSV record. A value is written as the JSON reads write it (to_json), strings
 * without their quotes: numbers and booleans as JSON, timestamps in the same RFC 3339 form,
 * arrays and objects as their JSON text, NULL (and a JSON null) as the empty field.
 */
const csvRowSql = (plan: ReadPlan) => csvRecordSql(plan.output.map((_, i) => `(to_json(c${i}) #>> '{}')`));

interface BodyRenderer {
  /** The whole page's body as one text, from the rows of pds_page. */
  readonly page: (plan: ReadPlan, params: Parameters) => string;
  /** One row of pds_page as text, for a page streamed from a cursor (without separators). */
  readonly row: (plan: ReadPlan, params: Parameters) => string;
}

const jsonArraySql = (plan: ReadPlan, params: Parameters) => `coalesce(json_agg(${pageRowJsonSql(plan, params)}), '[]')`;

/** How PostgreSQL writes a body in each media type; PostgREST's shapes, built in SQL. */
const BODY_RENDERERS: Readonly<Record<ReadMediaType, BodyRenderer>> = {
  json: {
    page: (plan, params) => `${jsonArraySql(plan, params)}::text`,
    row: (plan, params) => `${pageRowJsonSql(plan, params)}::text`,
  },
  singular: {
    page: (plan, params) => `(${jsonArraySql(plan, params)}->0)::text`,
    row: (plan, params) => `${pageRowJsonSql(plan, params)}::text`,
  },
  // Every record ends with CRLF; the header is there even when no row is.
  csv: {
    page: (plan, params) => `${csvHeaderSql(plan, params)} || coalesce(string_agg(${csvRowSql(plan)}, ''), '')`,
    row: (plan) => csvRowSql(plan),
  },
};

function countSql(plan: ReadPlan, tenants: Tenants, params: Parameters, cap?: number | bigint): string {
  const inner = `SELECT 1${fromWhereSql(plan, tenants, params)}`;
  return cap === undefined
    ? `SELECT count(*) FROM (${inner}) pds_all`
    : `SELECT count(*) FROM (${inner} LIMIT ${params.add(String(cap))}) pds_capped`;
}

/**
 * The values of the columns c<i> counted: count() of each evaluates it on every row, where an
 * unreferenced column would not be, so that a cast that fails on any row fails the statement.
 */
const countedColumnsSql = (indexes: readonly number[]) => indexes.map((i) => `count(c${i})`).join(' + ');

/**
 * Without a body (HEAD), the page's casts that can fail are still computed on every row, so that
 * HEAD answers the 4xx GET's body would: a `select=email::json` HEAD was 206 where its GET was 400.
 */
function castValuesSql(plan: ReadPlan): string {
  const casts = plan.output.flatMap((output, i) => (castCanFail(output) ? [i] : []));
  return casts.length === 0 ? 'NULL::text' : `(${countedColumnsSql(casts)})::text`;
}

/**
 * One statement for a page that is sent whole: the total (when an exact count is asked for),
 * the number of rows, and the body in the plan's media type, built by PostgreSQL (without one,
 * the count of the values of its casts that can fail). PostgREST's shape. readWhole
 * (src/query/execute.ts) reads the three columns by their place.
 */
export function buildPageStatement(plan: ReadPlan, tenants: Tenants, options: { exactCount: boolean; body: boolean }): Statement {
  const params = new Parameters();
  const page = pageSql(plan, tenants, params);
  const total = options.exactCount ? `(${countSql(plan, tenants, params)})::text` : 'NULL::text';
  const body = options.body ? BODY_RENDERERS[plan.mediaType].page(plan, params) : castValuesSql(plan);
  return {
    text: `WITH pds_page AS (${page}) SELECT ${total} AS total, count(*)::integer AS page_total, ${body} AS body FROM pds_page`,
    params: params.values,
  };
}

/**
 * A JSON page without a total as one row per object, `row`, for the caller to put in an array.
 * A LIMIT inside a subquery (buildPageStatement's CTE) over several shards is planned by Citus as
 * a subplan whose rows are materialised on the coordinator before the JSON is built; a top-level
 * ORDER BY … LIMIT is run on each shard and merged (EXPLAIN: one job of one task per shard, no
 * Distributed Subplan), and each shard builds its rows' JSON.
 */
export function buildPageRowsStatement(plan: ReadPlan, tenants: Tenants): Statement {
  const params = new Parameters();
  const row = `${strippedIfAsked(plan, rowJsonSql(plan.output, params))}::text AS row`;
  return { text: pageSql(plan, tenants, params, row), params: params.values };
}

/** The filtered rows counted, optionally stopping at `cap` rows. */
export function buildCountStatement(plan: ReadPlan, tenants: Tenants, cap?: number | bigint): Statement {
  const params = new Parameters();
  return { text: `SELECT (${countSql(plan, tenants, params, cap)})::text AS total`, params: params.values };
}

/**
 * One row of a university's `resource` by its id, every column as a read of it answers them (its
 * JSON as text): what the operator API answers for a row it creates in a partner's resource.
 */
export function buildRowByIdStatement(resource: Resource, universityId: string, id: string): Statement {
  const params = new Parameters();
  const row = rowJsonSql(wholeRowOutput(resource), params);
  const where = `${tenantConditionSql(resource.tenantColumn.name, [universityId], params)} AND id = ${params.add(id)}::uuid`;
  return { text: `SELECT (${row})::text AS row FROM ${quoteIdentifier(resource.relation)} WHERE ${where}`, params: params.values };
}

/** The planner's estimate of the filtered rows (`Prefer: count=planned`); read by plannedRows. */
export function buildPlannedCountStatement(plan: ReadPlan, tenants: Tenants): Statement {
  const params = new Parameters();
  const rows = `SELECT 1${fromWhereSql(plan, tenants, params)}`;
  return { text: `EXPLAIN (FORMAT JSON) ${rows}`, params: params.values };
}

/**
 * The page's casts that can fail (castCanFail), computed over every row of the page and nothing
 * else; null when it has none. A streamed page runs it before its status line, so that a cast
 * failing on any row is the 4xx, as PostgREST, which builds every body whole, answers it, while the
 * body itself still streams.
 */
export function buildCastCheckStatement(plan: ReadPlan, tenants: Tenants): Statement | null {
  const casts = plan.output.filter(castCanFail);
  if (casts.length === 0) return null;
  const params = new Parameters();
  const columns = casts.map((output, i) => `${outputSql(output, params)} AS c${i}`).join(', ');
  const page = pageSql(plan, tenants, params, columns);
  return { text: `SELECT ${countedColumnsSql(casts.map((_, i) => i))} AS cast_values FROM (${page}) pds_casts`, params: params.values };
}

export const PAGE_CURSOR = 'pds_page_rows';

/** A cursor over the page, one text per row in the plan's media type, for pages streamed in batches. */
export function buildCursorStatement(plan: ReadPlan, tenants: Tenants): Statement {
  const params = new Parameters();
  const page = pageSql(plan, tenants, params);
  const row = BODY_RENDERERS[plan.mediaType].row(plan, params);
  return {
    text: `DECLARE ${PAGE_CURSOR} NO SCROLL CURSOR FOR SELECT ${row} AS row FROM (${page}) pds_page`,
    params: params.values,
  };
}

/** The CSV header record of a streamed page, which goes out before its rows. */
export function buildCsvHeaderStatement(plan: ReadPlan): Statement {
  const params = new Parameters();
  return { text: `SELECT ${csvHeaderSql(plan, params)} AS header`, params: params.values };
}
