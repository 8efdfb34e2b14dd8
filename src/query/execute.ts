/**
 * Runs a read plan in the caller's scope and returns what was read: the page's row count, the
 * total a count preference asked for, and the body as PostgreSQL wrote it in the plan's media
 * type (JSON or CSV), either whole or streamed from a cursor in batches. The HTTP answer
 * (status, headers) is src/http/read-response.ts's.
 */
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Database, Scope } from '../db/database.ts';
import type { Queryable } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { LargePageSlots } from './large-pages.ts';
import type { ReadMediaType } from './media-types.ts';
import { BIGINT_MAX, type ReadPlan } from './plan.ts';
import {
  PAGE_CURSOR, type Statement, type Tenants, buildCastCheckStatement, buildCountStatement, buildCsvHeaderStatement, buildCursorStatement, buildPageRowsStatement, buildPageStatement,
  buildPlannedCountStatement,
} from './sql.ts';

/**
 * Rows fetched from the cursor at a time: few enough that little is in flight (10,000 résumés
 * at 500 a batch raised peak memory about three times as much as at 100, at the same speed).
 */
const STREAM_BATCH_ROWS = 100;

interface PageSize {
  /** Rows in the page. */
  readonly rows: number;
  /** The total the count preference asked for; null when none was asked for. */
  readonly total: number | null;
}

/** Whether a page starts past its counted total, which is 416 (src/http/read-response.ts): it has nothing to send. */
export const offsetPastTotal = (plan: ReadPlan, total: number | null): boolean => total !== null && plan.page.offset > total;

export interface ReadResult extends PageSize {
  /** The page in the plan's media type, as bytes or text, or streamed; null for HEAD. */
  readonly body: string | Buffer | Readable | null;
}

/** A node of EXPLAIN (FORMAT JSON)'s plan; Citus's scan of a distributed table carries its tasks. */
export interface PlanNode {
  readonly 'Plan Rows': number;
  readonly 'Distributed Query'?: { readonly Job: { readonly Tasks: readonly { readonly 'Remote Plan': readonly (readonly { readonly Plan: PlanNode }[])[] }[] } };
}

/**
 * The rows a plan expects. Citus's own node gives a placeholder (100,000 whatever the table), so
 * for a distributed scan the figure is the sum of its tasks' plans, each made by the node that
 * holds the shard from that shard's statistics (all tasks are shown: citus.explain_all_tasks).
 */
export function plannedRows(plan: PlanNode): number {
  const tasks = plan['Distributed Query']?.Job.Tasks;
  if (!tasks) return plan['Plan Rows'];
  return tasks.reduce((sum, task) => sum + plannedRows(task['Remote Plan'][0][0].Plan), 0);
}

async function plannedTotal(tx: Queryable, plan: ReadPlan, tenants: Tenants): Promise<number> {
  const statement = buildPlannedCountStatement(plan, tenants);
  const [, [row]] = await Promise.all([
    tx.exec('set local citus.explain_all_tasks = on'),
    tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(statement.text, statement.params),
  ]);
  return Math.round(plannedRows(row['QUERY PLAN'][0].Plan));
}

/** Where a page ends, within the row cap PostgreSQL takes: counting this many rows tells how many it holds (rowsOnPage). */
function pageEnd({ offset, limit }: ReadPlan['page']): bigint {
  const end = offset + BigInt(limit);
  return end > BIGINT_MAX ? BIGINT_MAX : end;
}

/** How many of the first `reachable` rows a page holds: those past its offset, at most its limit. */
function rowsOnPage({ offset, limit }: ReadPlan['page'], reachable: number): number {
  const past = BigInt(reachable) - offset;
  return past <= 0n ? 0 : Math.min(limit, Number(past));
}

async function countedTotal(tx: Queryable, plan: ReadPlan, tenants: Tenants, cap?: number | bigint): Promise<number> {
  const statement = buildCountStatement(plan, tenants, cap);
  const [row] = await tx.query<{ total: string }>(statement.text, statement.params);
  return Number(row.total);
}

/**
 * `planned` and `estimated`: exact up to the row cap, the planner's figure beyond it and never
 * below the cap + 1. The planner's figure comes from statistics over every university's rows,
 * so a scope that holds at most 10,000 matching rows never sees it.
 */
async function estimatedTotal(tx: Queryable, plan: ReadPlan, tenants: Tenants): Promise<number> {
  const capped = await countedTotal(tx, plan, tenants, LIMITS.rowsPerResponse + 1);
  return capped > LIMITS.rowsPerResponse ? Math.max(capped, await plannedTotal(tx, plan, tenants)) : capped;
}

export interface ReadOptions {
  readonly head: boolean;
  /** Off: `planned` and `estimated` are answered with exact counts (PDS_PLANNED_COUNTS). */
  readonly plannedCounts: boolean;
  /** Told of a failure after the status line went out; the response is aborted by then. */
  readonly onLateError: (error: unknown) => void;
  /** The instance's slots for pages sent as their client reads them. */
  readonly largePages: LargePageSlots;
}

const countsExactly = (plan: ReadPlan, options: ReadOptions) =>
  plan.count === 'exact' || (plan.count !== null && !options.plannedCounts);

/** The total a count preference asks for; `exact` says whether it is the true number. */
async function totalOf(tx: Queryable, plan: ReadPlan, tenants: Tenants, options: ReadOptions): Promise<{ total: number | null; exact: boolean }> {
  if (plan.count === null) return { total: null, exact: false };
  if (countsExactly(plan, options)) return { total: await countedTotal(tx, plan, tenants), exact: true };
  return { total: await estimatedTotal(tx, plan, tenants), exact: false };
}

/**
 * A single object (`Accept: application/vnd.pgrst.object+json`): the page is read with at most
 * two rows; only when more than one row matches is the number counted for the error. A count
 * preference is answered as for any page (PostgREST checks the one row first, then the range).
 */
async function readSingular(tx: Queryable, plan: ReadPlan, tenants: Tenants, options: ReadOptions): Promise<ReadResult> {
  const twoAtMost: ReadPlan = { ...plan, page: { ...plan.page, limit: Math.min(plan.page.limit, 2) } };
  const statement = buildPageStatement(twoAtMost, tenants, { exactCount: false, body: !options.head });
  const [row] = await tx.query<{ page_total: number; body: string | null }>(statement.text, statement.params);
  if (row.page_total !== 1) {
    const rows = row.page_total === 0 ? 0 : rowsOnPage(plan.page, await countedTotal(tx, plan, tenants, pageEnd(plan.page)));
    throw apiError('PGRST116', rows);
  }
  const { total } = await totalOf(tx, plan, tenants, options);
  return { rows: 1, total, body: options.head ? null : row.body };
}

/**
 * What json_agg writes between two elements: the page framed here reads byte for byte as the
 * one PostgreSQL aggregates.
 */
const JSON_AGG_SEPARATOR = Buffer.from(', ');
const [JSON_ARRAY_OPEN, JSON_ARRAY_CLOSE] = [Buffer.from('['), Buffer.from(']')];

/**
 * Whether a page comes as one row per object (buildPageRowsStatement): on Citus, a JSON page
 * without a total, from its first row. There that statement over one university reads one table
 * with nothing around it, which Citus plans on its fast path; the aggregating statement's CTE
 * goes through its router planner (one university's cheap page on the node holding its shard:
 * 3,234/s aggregated, 4,558/s as rows, pgbench as in ReadPlan.relation). Over several
 * universities it runs on each shard with no subplan. Elsewhere a page is one aggregated row:
 * PostgreSQL spends about the same on either statement (a consortium's cheap page by pgbench,
 * 7,400–8,100/s aggregated, 7,900–9,000/s as rows), and receiving 100 rows costs the service far
 * more than receiving one: one university's page cost postgres.js 70 µs of CPU against 37 µs (the
 * service served 12–15 % fewer pages as rows), and a consortium's page took the service 305–503 µs
 * of CPU as rows against 220–309 µs aggregated (2,328–2,730/s against 1,573–2,331/s, five
 * interleaved rounds). With an offset the rows statement would build the JSON of every row it
 * skips (the select list is computed below the OFFSET): a consortium's page at offset 90,000,
 * sent as rows, answered nothing within the statement timeout at 32 connections, where the
 * aggregated statement, which builds the JSON of the page's rows only, had answered.
 */
export function sentAsRows(plan: ReadPlan, distributed: boolean): boolean {
  return distributed && plan.count === null && plan.mediaType === 'json' && plan.page.offset === 0n;
}

/** A column as bytes: as the driver handed them over, or its text encoded. */
const bytesOf = (column: unknown): Buffer =>
  (Buffer.isBuffer(column) ? column : column instanceof Uint8Array ? Buffer.from(column.buffer, column.byteOffset, column.byteLength) : Buffer.from(String(column)));

/** A number column, whether it came as bytes, text or a number. */
const numberOf = (column: unknown): number => Number(column instanceof Uint8Array ? bytesOf(column).toString() : column);

/**
 * Whole pages' statements by plan, tenants and form. A plan is one object per distinct request
 * (src/query/read-plans.ts) and the tenants one array per principal while its token is cached
 * (src/domain/tokens.ts), so a repeated page reuses its statement instead of building its text
 * and parameters again (building it was about 2 % of the service's CPU on the cheap page, CPU
 * profile in one process). The keys are weak: an entry goes with its plan or its principal.
 */
const wholePageStatements = new WeakMap<ReadPlan, WeakMap<Tenants, Map<string, Statement>>>();

function wholePageStatement(plan: ReadPlan, tenants: Tenants, form: string, build: () => Statement): Statement {
  let byTenants = wholePageStatements.get(plan);
  if (!byTenants) wholePageStatements.set(plan, byTenants = new WeakMap());
  let byForm = byTenants.get(tenants);
  if (!byForm) byTenants.set(tenants, byForm = new Map());
  let statement = byForm.get(form);
  if (!statement) byForm.set(form, statement = build());
  return statement;
}

/**
 * A page sent whole. An exact total is counted in the page's own statement, so without an
 * estimated total the read is one statement, and its transaction one round trip. A JSON page
 * without a total may come as one row per object (sentAsRows), put in its array here. The body
 * goes out as the bytes PostgreSQL sent (Queryable.queryColumns), never decoded into a string and encoded
 * back: for a 100-row page of 12 KB that was 7–11 µs of ASCII text, 22–26 µs with accented names.
 */
async function readWhole(db: Database, scope: Scope, plan: ReadPlan, options: ReadOptions): Promise<ReadResult> {
  const tenants = scope.universityIds;
  // HEAD counts the page's rows without building their JSON (below).
  if (!options.head && sentAsRows(plan, await db.store.isDistributed())) {
    const statement = wholePageStatement(plan, tenants, 'rows', () => buildPageRowsStatement(plan, tenants));
    const rows = await db.readAsPartner(scope, statement.text, statement.params);
    const parts = rows.flatMap(([row], i) => (i === 0 ? [bytesOf(row)] : [JSON_AGG_SEPARATOR, bytesOf(row)]));
    return { rows: rows.length, total: null, body: Buffer.concat([JSON_ARRAY_OPEN, ...parts, JSON_ARRAY_CLOSE]) };
  }
  const exactCount = countsExactly(plan, options);
  const withBody = !options.head;
  const statement = wholePageStatement(plan, tenants, `page ${exactCount} ${withBody}`, () => buildPageStatement(plan, tenants, { exactCount, body: withBody }));
  // The statement's columns in buildPageStatement's order: total, page_total, body.
  const resultOf = ([total, pageTotal, body]: unknown[], estimated: number | null): ReadResult =>
    ({ rows: numberOf(pageTotal), total: exactCount ? numberOf(total) : estimated, body: options.head || body === null ? null : bytesOf(body) });
  if (plan.count === null || exactCount) {
    const [row] = await db.readAsPartner(scope, statement.text, statement.params);
    return resultOf(row, null);
  }
  return db.asPartner(scope, async (tx) => {
    const estimated = await estimatedTotal(tx, plan, tenants);
    const [row] = await tx.queryColumns(statement.text, statement.params);
    return resultOf(row, estimated);
  }, { readOnly: true });
}

/**
 * A streamed page's size, and its casts that can fail checked on every row (buildCastCheckStatement):
 * all before its status line, so a failure there is the 4xx.
 */
async function measureStreamedPage(tx: Queryable, plan: ReadPlan, tenants: Tenants, options: ReadOptions): Promise<PageSize> {
  const castCheck = buildCastCheckStatement(plan, tenants);
  if (castCheck) await tx.query(castCheck.text, castCheck.params);
  const { total, exact } = await totalOf(tx, plan, tenants, options);
  const reachable = exact ? total! : await countedTotal(tx, plan, tenants, pageEnd(plan.page));
  return { rows: rowsOnPage(plan.page, reachable), total };
}

/** A measured page's body, read whole in its transaction (the total is the measure's): readWhole's statement without a count. */
async function wholeBodyIn(tx: Queryable, plan: ReadPlan, tenants: Tenants): Promise<Buffer> {
  const statement = wholePageStatement(plan, tenants, 'page false true', () => buildPageStatement(plan, tenants, { exactCount: false, body: true }));
  const [[, , body]] = await tx.queryColumns(statement.text, statement.params);
  return bytesOf(body);
}

/** The media types a page can be streamed in: a single object is never more than one row. */
type StreamedMediaType = Exclude<ReadMediaType, 'singular'>;

/** What goes around and between a streamed page's rows. */
interface StreamFraming {
  /** What precedes the first row. */
  readonly open: (tx: Queryable, plan: ReadPlan) => Promise<string>;
  /** What goes between two rows; none when each row ends itself. */
  readonly separator: Buffer | null;
  readonly close: string;
}

async function csvHeader(tx: Queryable, plan: ReadPlan): Promise<string> {
  const statement = buildCsvHeaderStatement(plan);
  const [row] = await tx.query<{ header: string }>(statement.text, statement.params);
  return row.header;
}

const STREAM_FRAMING: Readonly<Record<StreamedMediaType, StreamFraming>> = {
  json: { open: async () => '[', separator: Buffer.from(','), close: ']' },
  // Each CSV record ends with its CRLF; the header record comes first.
  csv: { open: csvHeader, separator: null, close: '' },
};

/** The cursor's next rows, each its one column as the driver handed it over (Queryable.queryColumns). */
const fetchBatch = async (tx: Queryable) =>
  (await tx.queryColumns(`FETCH FORWARD ${STREAM_BATCH_ROWS} FROM ${PAGE_CURSOR}`)).map(([row]) => row as string | Uint8Array);

/**
 * Rows go out as the bytes PostgreSQL sent where the driver allows: no decoding into strings
 * that outlive the garbage collector's young generation, and no encoding back. The first batch
 * was fetched before the status line, so a value that fails on every row (a bad cast) is a 4xx.
 */
async function* streamedRows(tx: Queryable, framing: StreamFraming, opening: string, firstBatch: (string | Uint8Array)[]): AsyncGenerator<string | Uint8Array> {
  yield opening;
  let first = true;
  for (let rows = firstBatch; rows.length > 0; rows = await fetchBatch(tx).catch(abortPage)) {
    for (const row of rows) {
      if (!first && framing.separator) yield framing.separator;
      first = false;
      yield row;
    }
  }
  yield framing.close;
}

/**
 * What a page that failed after its status line is destroyed with: the SQLSTATE alone. The
 * failure's own message can quote a row's value (`invalid input syntax for type integer: "x"`),
 * and the stream's error reaches the logs.
 */
class PageAbortedError extends Error {
  readonly code: string;
  constructor(cause: unknown) {
    const code = String((cause as { code?: unknown })?.code ?? 'UNKNOWN');
    super(`The page failed after its first rows were sent (${code}).`);
    this.code = code;
  }
}

const abortPage = (error: unknown): never => {
  throw new PageAbortedError(error);
};

/** Node's code when a stream ends without its end: here, the client went away. */
const PREMATURE_CLOSE = 'ERR_STREAM_PREMATURE_CLOSE';

/**
 * A page whose limit exceeds LIMITS.wholePageRows (or that has none) is measured first (so status
 * and Content-Range are known before the first byte). When it holds no more rows than that it is
 * read whole, and its connection is free before the client reads; else, with one of the large
 * page slots (src/query/large-pages.ts), its first batch is fetched, then the rest streamed from a
 * cursor with back-pressure, all in one repeatable-read snapshot so the rows sent are the rows
 * counted. The transaction stays open until the stream ends. A failure after the status line destroys the body stream, so the
 * client sees an aborted transfer (no closing `]`, no last chunk), and reaches `onLateError`.
 */
function readStreamed(db: Database, scope: Scope, plan: ReadPlan, mediaType: StreamedMediaType, options: ReadOptions): Promise<ReadResult> {
  const framing = STREAM_FRAMING[mediaType];
  return new Promise((resolve, reject) => {
    let answered = false;
    const answer = (result: ReadResult) => {
      answered = true;
      resolve(result);
    };
    db.asPartner(scope, async (tx) => {
      const size = await measureStreamedPage(tx, plan, scope.universityIds, options);
      const declareCursor = async () => {
        const cursor = buildCursorStatement(plan, scope.universityIds);
        await tx.query(cursor.text, cursor.params);
      };
      if (options.head) {
        // GET's statement is planned, not run: a column or operator its select list or order
        // cannot take is the HEAD's 4xx too (it was 200, GET's 404).
        await declareCursor();
        return answer({ ...size, body: null });
      }
      // A planned total can fall short of the rows there are: a page past it is 416 with no body,
      // where a stream opened for it held its transaction and its slot for good.
      if (offsetPastTotal(plan, size.total)) return answer({ ...size, body: null });
      if (size.rows <= LIMITS.wholePageRows) return answer({ ...size, body: await wholeBodyIn(tx, plan, scope.universityIds) });
      const giveBack = options.largePages.take(db.partnerReader(scope).scope.value);
      try {
        const opening = await framing.open(tx, plan);
        await declareCursor();
        const body = Readable.from(streamedRows(tx, framing, opening, await fetchBatch(tx)), { objectMode: false });
        answer({ ...size, body });
        await finished(body).catch((error: { code?: unknown }) => {
          if (error.code !== PREMATURE_CLOSE) throw error;
        });
      } finally {
        giveBack();
      }
    }, { isolation: 'repeatable read', readOnly: true }).catch((error) => (answered ? options.onLateError(error) : reject(error)));
  });
}

export function executeRead(db: Database, scope: Scope, plan: ReadPlan, options: ReadOptions): Promise<ReadResult> {
  const { mediaType } = plan;
  const tenants = scope.universityIds;
  if (mediaType === 'singular') return db.asPartner(scope, (tx) => readSingular(tx, plan, tenants, options), { readOnly: true });
  if (plan.page.limit > LIMITS.wholePageRows) return readStreamed(db, scope, plan, mediaType, options);
  return readWhole(db, scope, plan, options);
}
