/**
 * The change feed (docs/api.md, "Change feed"): what was created, updated and erased among a
 * scope's students and cohorts since a cursor, in commit order per university.
 *
 * Every transaction that changes a university's students or cohorts draws the university's next
 * change number under its lock and stamps the rows it writes with it (src/db/locks.ts,
 * src/domain/change-stamps.ts); an erasure leaves a tombstone with the id alone. A feed entry is
 * a row as it is now, placed at its last change number, so a row changed twice since the cursor
 * appears once; its position is (change number, resource, id), and the cursor holds, for each
 * university, the position of the last entry the reader was given.
 *
 * A page reads first each university's last committed change number, then the entries up to it,
 * a statement per university. Every number up to it had committed by the first statement, so the
 * later ones see all of them, whenever they run: an entry can only leave that window by changing
 * again, to a number above it, where the next page finds it. Entries of a transaction still
 * running come after the window, and after every cursor a page gives out.
 */
import { Type } from 'typebox';
import { Value } from 'typebox/value';
import { arrayLiteral } from '../db/array-literal.ts';
import type { Database, Scope } from '../db/database.ts';
import { Parameters } from '../db/parameters.ts';
import type { Queryable } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { CHANGE_FEED_DEFAULTS, LIMITS } from '../limits.ts';
import { FEED_RESOURCES, type FeedResource, resourcesByName } from '../resources/registry.ts';
import { wholeRowOutput } from './plan.ts';
import { type Statement, rowJsonSql, universityRelationSql } from './sql.ts';

/** A feed follows every resource of FEED_RESOURCES, or one of them. */
export type Feed = 'all' | FeedResource;

/** A university's position: the last entry given out, as [change number, resource, id]. */
type Position = readonly [seq: number, resource: string, id: string];

/** Before every entry: below change number 0, which rows written before the feed existed carry. */
const START: Position = [-1, '', '00000000-0000-0000-0000-000000000000'];

/** Every feed, each served at its own path (src/http/change-routes.ts); a compact cursor names its feed by the index here. */
export const FEEDS: readonly Feed[] = ['all', ...FEED_RESOURCES];

/**
 * A uuid as the feed writes one, in lower case: a university's key in upper case was taken as
 * another university's, and a forged position of the reader's own was dropped, not refused.
 */
const CURSOR_UUID = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

/**
 * The cursor's first form, base64url of this JSON, about 123 characters a university: given out
 * while `since=` and it fit in the query string (16,384 bytes), so that every release reads
 * what any gave out to those, during a rolling update and after a rollback; a consortium of 130
 * members was given one longer, which the feed then refused.
 */
const JSON_CURSOR_SCHEMA = Type.Object({
  v: Type.Literal(1),
  feed: Type.Enum(FEEDS),
  at: Type.Record(Type.String({ pattern: CURSOR_UUID }), Type.Tuple([
    Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Enum([...FEED_RESOURCES]), Type.String({ pattern: CURSOR_UUID }),
  ]), { additionalProperties: false }),
}, { additionalProperties: false });

/**
 * The compact form, given out where the first does not fit: base64url of bytes, the version (2),
 * the feed's index in FEEDS, then per university its id, the resource's index in FEED_RESOURCES,
 * the entry's id and the change number, 39 bytes (52 characters a university).
 */
const BINARY_CURSOR_VERSION = 2;
const UUID_BYTES = 16;
/** A change number in 48 bits: a university would need 2^48 transactions to outgrow it. */
const SEQ_BYTES = 6;
const POSITION_BYTES = UUID_BYTES + 1 + UUID_BYTES + SEQ_BYTES;

/**
 * The longest cursor a client can send back: the query string less the other parameter the feed
 * takes, at its longest (docs/nightly-sync.md sends `limit=1000&since=…`). A JSON cursor that left
 * room for `since=` alone was refused 414 with `limit` beside it, and its partner stuck for good.
 */
const CURSOR_CHARACTERS = LIMITS.maxQueryStringBytes - `limit=${LIMITS.changesPerResponse}&since=`.length;

/** The most universities one cursor can hold (docs/api.md, "Change feed"). */
export const CURSOR_UNIVERSITIES = Math.floor((Math.floor(CURSOR_CHARACTERS * 3 / 4) - 2) / POSITION_BYTES);

interface CursorContent {
  readonly feed: Feed;
  readonly at: ReadonlyMap<string, Position>;
}

const uuidOf = (bytes: Buffer): string => {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

/** The cursor in its first form (JSON_CURSOR_SCHEMA). */
export const jsonCursor = (feed: Feed, at: Readonly<Record<string, Position>>): string =>
  Buffer.from(JSON.stringify({ v: 1, feed, at })).toString('base64url');

/** The cursor in its compact form. */
export function binaryCursor(feed: Feed, at: Readonly<Record<string, Position>>): string {
  const positions = Object.entries(at);
  const bytes = Buffer.alloc(2 + positions.length * POSITION_BYTES);
  bytes[0] = BINARY_CURSOR_VERSION;
  bytes[1] = FEEDS.indexOf(feed);
  positions.forEach(([universityId, [seq, resource, id]], i) => {
    const offset = 2 + i * POSITION_BYTES;
    bytes.write(universityId.replaceAll('-', ''), offset, 'hex');
    bytes[offset + UUID_BYTES] = FEED_RESOURCES.indexOf(resource as FeedResource);
    bytes.write(id.replaceAll('-', ''), offset + UUID_BYTES + 1, 'hex');
    bytes.writeUIntBE(seq, offset + 2 * UUID_BYTES + 1, SEQ_BYTES);
  });
  return bytes.toString('base64url');
}

/** The cursor a page gives out: in its first form while that fits in the query string, else in the compact one. */
export function encodeCursor(feed: Feed, at: Readonly<Record<string, Position>>): string {
  const json = jsonCursor(feed, at);
  return json.length <= CURSOR_CHARACTERS ? json : binaryCursor(feed, at);
}

/** A cursor's bytes in the compact form, or null when they are not one. */
function readBinaryCursor(bytes: Buffer): CursorContent | null {
  const feed = FEEDS[bytes[1]];
  if (bytes[0] !== BINARY_CURSOR_VERSION || feed === undefined || (bytes.length - 2) % POSITION_BYTES !== 0) return null;
  const at = new Map<string, Position>();
  for (let offset = 2; offset < bytes.length; offset += POSITION_BYTES) {
    const universityId = uuidOf(bytes.subarray(offset, offset + UUID_BYTES));
    const resource = FEED_RESOURCES[bytes[offset + UUID_BYTES]];
    if (resource === undefined || at.has(universityId)) return null;
    const id = uuidOf(bytes.subarray(offset + UUID_BYTES + 1, offset + 2 * UUID_BYTES + 1));
    at.set(universityId, [bytes.readUIntBE(offset + 2 * UUID_BYTES + 1, SEQ_BYTES), resource, id]);
  }
  return { feed, at };
}

/** A cursor's bytes in the first form, or null when they are not one. */
function readJsonCursor(bytes: Buffer): CursorContent | null {
  let content: unknown;
  try {
    content = JSON.parse(bytes.toString('utf8'));
  } catch {
    return null;
  }
  if (!Value.Check(JSON_CURSOR_SCHEMA, content)) return null;
  return { feed: content.feed as Feed, at: new Map(Object.entries(content.at) as [string, Position][]) };
}

/** The positions a `since` cursor holds, checked strictly: anything but a cursor this feed gave out is INVALID_CURSOR. */
export function decodeCursor(feed: Feed, since: string): ReadonlyMap<string, Position> {
  const bytes = Buffer.from(since, 'base64url');
  // Node's decoder skips what is not base64url; only a text that encodes back to itself is one.
  if (since === '' || bytes.toString('base64url') !== since) throw apiError('INVALID_CURSOR', 'it is not base64url');
  const cursor = bytes[0] === '{'.charCodeAt(0) ? readJsonCursor(bytes) : readBinaryCursor(bytes);
  if (cursor === null) throw apiError('INVALID_CURSOR', 'it does not hold a position');
  if (cursor.feed !== feed) throw apiError('INVALID_CURSOR', `it belongs to the ${cursor.feed === 'all' ? 'whole' : cursor.feed} feed`);
  const misplaced = [...cursor.at.values()].find(([, resource]) => feed !== 'all' && resource !== feed);
  if (misplaced) throw apiError('INVALID_CURSOR', `it holds a position among ${misplaced[1]}`);
  return cursor.at;
}

export interface ChangesRequest {
  readonly feed: Feed;
  /** Null: from the start. */
  readonly since: string | null;
  readonly limit: number;
}

/** The feed's query parameters, `since` and `limit`, each at most once; anything else is refused. */
export function parseChangesRequest(feed: Feed, query: Readonly<Record<string, unknown>>): ChangesRequest {
  const unknown = Object.keys(query).find((name) => name !== 'since' && name !== 'limit');
  if (unknown !== undefined) throw apiError('INVALID_PARAMETER', `the change feed takes since and limit, not ${unknown}`);
  const { since, limit } = query;
  if (Array.isArray(since) || Array.isArray(limit)) throw apiError('INVALID_PARAMETER', 'since and limit may each be sent once');
  if (limit !== undefined && (!/^[1-9][0-9]{0,6}$/.test(String(limit)) || Number(limit) > LIMITS.changesPerResponse)) {
    throw apiError('INVALID_PARAMETER', `limit must be a whole number from 1 to ${LIMITS.changesPerResponse}`);
  }
  return {
    feed,
    since: since === undefined ? null : String(since),
    limit: limit === undefined ? CHANGE_FEED_DEFAULTS.pageChanges : Number(limit),
  };
}

/** One university's window: after its position, up to its last committed change number. */
interface Window {
  readonly universityId: string;
  readonly after: Position;
  readonly through: string;
}

/**
 * Whether this history holds the entry at the window's position: its row, changed at that number
 * or later, or its tombstone. A database restored from an earlier backup draws the numbers it had
 * given out again, so a cursor from before the restore is past its last change only until new
 * changes pass it; then it would skip them silently, and leave the partner holding rows the
 * restore took away. Its last entry, though, is not in the restored history (or not at a number
 * that high). From the start there is no position to hold.
 */
function heldSql(w: Window, params: Parameters): string {
  if (w.after === START) return 'true';
  const { universityId, after: [seq, resource, id] } = w;
  const read = resourcesByName.get(resource)!;
  const [entry, number] = [`${params.add(id)}::uuid`, `${params.add(String(seq))}::bigint`];
  return `EXISTS (SELECT 1 FROM ${universityRelationSql(read.relation, read.tenantColumn.name, universityId, params)} WHERE id = ${entry} AND change_seq >= ${number})`
    + ` OR EXISTS (SELECT 1 FROM change_tombstones WHERE university_id = ${params.add(universityId)}::uuid AND resource = ${params.add(resource)}`
    + ` AND id = ${entry} AND change_seq >= ${number})`;
}

/**
 * Whether the history holds one university's position (heldSql), and its entries after it, up to
 * its last committed number, in feed order, at most `limit`: each resource's rows in their read
 * shape (`created` when the row was created after the position, `updated` otherwise) and the
 * tombstones of erased rows (the resource and the id, nothing else). A row with no entry, null,
 * when there is none. One university's statement: on Citus, one task on its shard.
 */
export function buildWindowStatement(feed: Feed, w: Window, limit: number): Statement {
  const params = new Parameters();
  const resources = feed === 'all' ? FEED_RESOURCES : [feed];
  const most = `${params.add(String(limit))}::bigint`;
  const [afterSeq, afterResource, afterId] = [`${params.add(String(w.after[0]))}::bigint`, `${params.add(w.after[1])}::text`, `${params.add(w.after[2])}::uuid`];
  const after = (seq: string, resource: string) => `${seq} >= ${afterSeq} AND (${seq}, ${resource}, id) > (${afterSeq}, ${afterResource}, ${afterId})`;
  const inWindow = (resource: string) => `${after('change_seq', resource)} AND change_seq <= ${params.add(w.through)}::bigint`;
  const rows = resources.map((resource) => {
    const read = resourcesByName.get(resource)!;
    const name = `${params.add(resource)}::text`;
    const entry = `json_build_object('resource', ${name}, 'id', id, 'change', CASE WHEN ${after('created_seq', name)} THEN 'created' ELSE 'updated' END,`
      + ` 'row', ${rowJsonSql(wholeRowOutput(read), params)})`;
    return `(SELECT change_seq AS seq, ${name} AS resource, id, ${entry}::text AS entry`
      + ` FROM ${universityRelationSql(read.relation, read.tenantColumn.name, w.universityId, params)}`
      + ` WHERE ${inWindow(name)} ORDER BY change_seq, id LIMIT ${most})`;
  });
  const tombstones = `(SELECT change_seq AS seq, resource, id, json_build_object('resource', resource, 'id', id, 'change', 'erased')::text AS entry`
    + ` FROM change_tombstones WHERE university_id = ${params.add(w.universityId)}::uuid AND resource = ANY(${params.add(arrayLiteral(resources))}::text[])`
    + ` AND ${inWindow('resource')} ORDER BY change_seq, resource, id LIMIT ${most})`;
  return {
    // Qualified: a bare `seq` would name the output column, text, and order 10 before 9.
    text: `SELECT h.held, c.seq::text AS seq, c.resource, c.id, c.entry FROM (SELECT ${heldSql(w, params)} AS held) h`
      + ` LEFT JOIN (SELECT * FROM (${[...rows, tombstones].join(' UNION ALL ')}) u ORDER BY u.seq, u.resource, u.id LIMIT ${most}) c ON true`
      + ' ORDER BY c.seq, c.resource, c.id',
    params: params.values,
  };
}

/** An entry of buildWindowStatement's, in feed order. */
interface EntryRow {
  seq: string;
  resource: string;
  id: string;
  entry: string;
}

/** A row of buildWindowStatement: every one says whether the position is held; the entry is null where there is none. */
type WindowRow = { held: boolean } & (EntryRow | { [Column in keyof EntryRow]: null });

/** Each university's last committed change number; 0 for one that never changed (rows written before the feed carry 0). */
async function committedThrough(tx: Queryable, universityIds: readonly string[]): Promise<Map<string, string>> {
  const rows = await tx.query<{ university_id: string; change_seq: string | number | bigint }>(
    'SELECT university_id, change_seq FROM tenants WHERE university_id = ANY($1::uuid[])', [arrayLiteral(universityIds)]);
  const through = new Map(universityIds.map((id) => [id, '0']));
  for (const row of rows) through.set(row.university_id, String(row.change_seq));
  return through;
}

/**
 * Universities whose windows are read at once, at most: a page reads them one after another in
 * id order, first one, then twice as many each time while they fill less than the page, so that
 * a consortium's quiet members take few round trips (314 in 14). One statement of all windows
 * cost Citus a plan for each member's branch, past the statement timeout at 314 members (2–3 s
 * at 200).
 */
const MOST_WINDOWS_AT_ONCE = 32;

/**
 * Entries the windows read at once are asked for in all, about: each asked for all the page still
 * wanted, 32 members with backlogs built 6,526 rows for a page of 200.
 */
export const MOST_ENTRIES_AT_ONCE = 2_000;

/**
 * The entries each of `windows` read at once is asked for: what the page still wants, or, in a
 * group, its share of MOST_ENTRIES_AT_ONCE when less (one window alone builds no row it does not
 * give). A window that answers all it was asked for may hold more, so the page ends with it.
 */
export const entriesAskedOfEach = (windows: number, wanted: number): number =>
  (windows === 1 ? wanted : Math.min(wanted, Math.ceil(MOST_ENTRIES_AT_ONCE / windows)));

/**
 * One page of the feed as the JSON body: `changes` in feed order (each university's in commit
 * order, the universities in id order), `next_cursor` to send as `since` next time (the positions
 * carried over for universities the page did not reach), and `has_more`. Universities of the
 * cursor outside the scope are dropped: their changes are not the caller's to see. A position is
 * checked against the history when its university is read.
 */
export function readChanges(db: Database, scope: Scope, request: ChangesRequest): Promise<string> {
  const positions = request.since === null ? new Map<string, Position>() : decodeCursor(request.feed, request.since);
  if (scope.universityIds.length === 0) return Promise.resolve(changesBody(request.feed, [], {}, false));
  return db.asPartner(scope, async (tx) => {
    const through = await committedThrough(tx, scope.universityIds);
    const windows = [...scope.universityIds].sort().map((universityId) => ({ universityId, after: positions.get(universityId) ?? START, through: through.get(universityId)! }));
    // Change numbers only grow, so a position past the last committed one was never given out:
    // kept, it would hide every change up to it.
    if (windows.some((w) => w.after[0] > Number(w.through))) throw apiError('INVALID_CURSOR', 'it holds a position past the last change');
    // The page ends, with more to come, once it holds more entries than it takes or a window answered all it was asked for.
    const read: { universityId: string; row: EntryRow }[] = [];
    let cut = false;
    for (let next = 0, atOnce = 1; next < windows.length && !cut; atOnce = Math.min(2 * atOnce, MOST_WINDOWS_AT_ONCE)) {
      const group = windows.slice(next, next + atOnce);
      next += group.length;
      const asked = entriesAskedOfEach(group.length, request.limit + 1 - read.length);
      const answers = await Promise.all(group.map(async (w) => {
        const statement = buildWindowStatement(request.feed, w, asked);
        const rows = await tx.query<WindowRow>(statement.text, statement.params);
        return { w, held: rows[0].held, rows: rows.filter((row): row is WindowRow & EntryRow => row.seq !== null) };
      }));
      if (answers.some(({ held }) => !held)) throw apiError('INVALID_CURSOR', 'it holds a position this database never gave out (was it restored from a backup?)');
      for (const { w, rows } of answers) {
        read.push(...rows.map((row) => ({ universityId: w.universityId, row })));
        cut = rows.length === asked || read.length > request.limit;
        if (cut) break;
      }
    }
    const page = read.slice(0, request.limit);
    const at: Record<string, Position> = {};
    for (const w of windows) if (w.after !== START) at[w.universityId] = w.after;
    for (const { universityId, row } of page) at[universityId] = [Number(row.seq), row.resource, row.id];
    return changesBody(request.feed, page.map(({ row }) => row.entry), at, cut);
  }, { readOnly: true });
}

/** The page's body around the entries PostgreSQL wrote. */
const changesBody = (feed: Feed, entries: readonly string[], at: Readonly<Record<string, Position>>, hasMore: boolean): string =>
  `{"changes":[${entries.join(',')}],"next_cursor":${JSON.stringify(encodeCursor(feed, at))},"has_more":${hasMore}}`;
