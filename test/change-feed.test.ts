/**
 * The change feed through HTTP on every store: creates, updates and erasures appear in commit
 * order with an opaque cursor; a tombstone carries only the id; a partner that replays the feed
 * from the start and applies it holds exactly what a full read shows (cohorts' student counts
 * included); a malformed cursor is 400; a consortium sees its members and nothing else; a cursor
 * outlives the app that gave it out; and a reader following the feed while writers run batches
 * and erasures ends with a full read's rows, having skipped no change.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import { Database } from '../src/db/database.ts';
import { openPgliteStore } from '../src/db/pglite-store.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import type { Store } from '../src/db/store.ts';
import { buildApp } from '../src/http/app.ts';
import { LIMITS } from '../src/limits.ts';
import { CURSOR_UNIVERSITIES, MOST_ENTRIES_AT_ONCE, binaryCursor, decodeCursor, encodeCursor, entriesAskedOfEach, jsonCursor } from '../src/query/changes.ts';
import { ADMIN_KEY, Harness, storeBackends } from './support/harness.ts';
import { DescriptionValidator } from './support/openapi.ts';

interface Entry {
  resource: 'students' | 'cohorts';
  id: string;
  change: 'created' | 'updated' | 'erased';
  row?: Record<string, unknown>;
}

interface Page {
  changes: Entry[];
  next_cursor: string;
  has_more: boolean;
}

const cohort = (name: string, overrides: Record<string, unknown> = {}) => ({
  name, display_name: name.toUpperCase(), program: 'History', degree: 'BA',
  start_date: '2025-09-01', end_date: '2999-06-30', intake_year: 2025, intake_term: 'Fall', ...overrides,
});

/** A partner's copy: the rows the feed gave, by resource and id. */
class Mirror {
  readonly rows = new Map<string, Record<string, unknown>>();
  readonly seen = new Set<string>();
  apply(entries: readonly Entry[]): void {
    for (const e of entries) {
      const key = `${e.resource}/${e.id}`;
      this.seen.add(key);
      if (e.change === 'erased') this.rows.delete(key);
      else this.rows.set(key, e.row!);
    }
  }
  of(resource: string): Record<string, unknown>[] {
    return [...this.rows].filter(([k]) => k.startsWith(`${resource}/`)).map(([, r]) => r).sort((a, b) => String(a.id).localeCompare(String(b.id)));
  }
}

test(`a cursor holding ${CURSOR_UNIVERSITIES} universities' positions fits in the query string as \`since\` in the compact form, and reads back as it was written`, () => {
  const at = Object.fromEntries(Array.from({ length: CURSOR_UNIVERSITIES }, (_, i) =>
    [randomUUID(), [2 ** 40 + i, i % 2 === 0 ? 'students' : 'cohorts', randomUUID()] as const]));
  const cursor = encodeCursor('all', at);
  assert.equal(cursor, binaryCursor('all', at), 'too long in the first form, it is given out in the compact one');
  assert.ok(`since=${cursor}`.length <= LIMITS.maxQueryStringBytes, String(cursor.length));
  assert.deepEqual(Object.fromEntries(decodeCursor('all', cursor)), at);
  assert.ok(`since=${encodeCursor('all', { ...at, [randomUUID()]: [1, 'students', randomUUID()] })}`.length > LIMITS.maxQueryStringBytes);
});

test('a cursor the feed gives out fits in the query string with the longest limit beside it, in whichever form', () => {
  const fits = (cursor: string) => `limit=${LIMITS.changesPerResponse}&since=${cursor}`.length <= LIMITS.maxQueryStringBytes;
  // Positions whose first form fits beside `since=` alone but not beside the limit too: one more
  // university at a time, then one more digit to a change number at a time, until it is so.
  const at: Record<string, [number, string, string]> = {};
  const firstFormLength = () => `since=${jsonCursor('all', at)}`.length;
  while (firstFormLength() < LIMITS.maxQueryStringBytes - 300) at[randomUUID()] = [1, 'students', randomUUID()];
  for (const position of Object.values(at)) {
    while (fits(jsonCursor('all', at)) && position[0] < 1e13) position[0] *= 10;
  }
  assert.ok(!fits(jsonCursor('all', at)) && firstFormLength() <= LIMITS.maxQueryStringBytes, String(firstFormLength()));
  assert.ok(fits(encodeCursor('all', at)));
  for (let universities = 1; universities <= CURSOR_UNIVERSITIES; universities += 7) {
    const some = Object.fromEntries(Array.from({ length: universities }, () => [randomUUID(), [2 ** 47, 'cohorts', randomUUID()] as const]));
    assert.ok(fits(encodeCursor('all', some)), `${universities} universities`);
  }
});

test('the universities a page reads at once are asked for what it still wants, or for their share of a bound when that is less', () => {
  for (const wanted of [1, 11, 101, 501, 1_001, 5_001]) {
    for (const windows of [1, 2, 4, 8, 16, 32]) {
      const asked = entriesAskedOfEach(windows, wanted);
      assert.ok(asked >= 1 && asked <= wanted && (windows === 1 || asked === wanted || windows * asked < MOST_ENTRIES_AT_ONCE + windows), `${windows} windows, ${wanted} wanted: ${asked}`);
    }
  }
  assert.deepEqual([1, 4, 32].map((windows) => entriesAskedOfEach(windows, 501)), [501, 500, 63]);
  assert.equal(entriesAskedOfEach(1, LIMITS.changesPerResponse + 1), LIMITS.changesPerResponse + 1, 'one university\'s page is never cut short');
});

for (const backend of storeBackends()) {
  describe(`change feed on ${backend}`, () => {
    let h: Harness;
    let consortium: string;
    let north: string;
    let south: string;
    let northWriter: string;
    let southWriter: string;
    let northReader: string;
    let consortiumReader: string;
    let serial = 0;

    const write = async (token: string, method: 'PUT' | 'PATCH', resource: 'students' | 'cohorts', rows: unknown[]) => {
      const res = await h.request({
        method, url: `/v1/${resource}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ [resource]: rows }),
      });
      assert.equal(res.status, 200, res.body);
      assert.equal(res.json.counts.rejected, 0, res.body);
      return res.json;
    };
    const student = (tag: string, cohortName: string, overrides: Record<string, unknown> = {}) => ({
      email: `${tag}.${++serial}@feed.example.edu`, first_name: 'Ada', last_name: `Row ${serial}`, cohort_name: cohortName, is_alumni: false, ...overrides,
    });
    const page = async (token: string, path = '/v1/changes', query: Record<string, string> = {}): Promise<Page> => {
      const res = await h.get(`${path}?${new URLSearchParams(query)}`, token);
      assert.equal(res.status, 200, res.body);
      return res.json;
    };
    /** Every page from `since` until the feed has no more; the entries in order and the cursor to keep. */
    const follow = async (token: string, since: string | null, options: { path?: string; limit?: number } = {}) => {
      const entries: Entry[] = [];
      let cursor = since;
      for (;;) {
        const p = await page(token, options.path, { ...(cursor ? { since: cursor } : {}), ...(options.limit ? { limit: String(options.limit) } : {}) });
        entries.push(...p.changes);
        cursor = p.next_cursor;
        if (!p.has_more) return { entries, cursor };
      }
    };
    const fullRead = async (token: string, resource: string) => {
      const res = await h.get(`/v1/${resource}?order=id`, token);
      assert.equal(res.status, 200, res.body);
      return res.json as Record<string, unknown>[];
    };
    const erase = async (id: string) => assert.equal((await h.admin('DELETE', `/students/${id}`)).status, 204);

    before(async () => {
      // On Citus a page of a consortium's feed is one statement per member in one transaction: 314
      // members' took 4–5 s on a 2-core VM, and beside other suites passed the default store wait
      // (6 s, PDS_DB_WAIT_MS) as 503 DATABASE_UNAVAILABLE (docs/scaling.md).
      h = await Harness.start(backend, backend === 'citus' ? { storeWaitMs: 30_000 } : {});
      consortium = (await h.admin('POST', '/consortia', { name: 'Feed Consortium' })).json.id;
      north = (await h.admin('POST', '/universities', { name: 'North Feed', consortium_id: consortium })).json.id;
      south = (await h.admin('POST', '/universities', { name: 'South Feed', consortium_id: consortium })).json.id;
      northWriter = (await h.admin('POST', '/tokens', { university_id: north, can_write: true })).json.token;
      southWriter = (await h.admin('POST', '/tokens', { university_id: south, can_write: true })).json.token;
      northReader = (await h.admin('POST', '/tokens', { university_id: north })).json.token;
      consortiumReader = (await h.admin('POST', '/tokens', { consortium_id: consortium })).json.token;
      await write(northWriter, 'PUT', 'cohorts', [cohort('n-2025'), cohort('n-2026')]);
      await write(southWriter, 'PUT', 'cohorts', [cohort('s-2025')]);
    });
    after(() => h.close());

    test('creates, updates and erasures appear after the cursor; a tombstone carries only the id', async () => {
      const start = await follow(northReader, null);
      const [ada, ben] = [student('ada', 'n-2025', { phone: '+441234567890' }), student('ben', 'n-2025')];
      const created = await write(northWriter, 'PUT', 'students', [ada, ben]);
      const [adaId, benId] = created.results.map((r: { id: string }) => r.id);

      const afterCreate = await follow(northReader, start.cursor);
      const adaCreated = afterCreate.entries.find((e) => e.id === adaId)!;
      assert.equal(adaCreated.change, 'created');
      assert.equal(adaCreated.row!.email, ada.email);
      assert.deepEqual(afterCreate.entries.filter((e) => e.resource === 'cohorts').map((e) => e.change), ['updated'], 'the cohort shows its new count');

      await write(northWriter, 'PATCH', 'students', [{ email: ben.email, last_name: 'Renamed' }]);
      const afterUpdate = await follow(northReader, afterCreate.cursor);
      assert.deepEqual(afterUpdate.entries.map((e) => [e.id, e.change, e.row?.last_name]), [[benId, 'updated', 'Renamed']]);

      await erase(adaId);
      const afterErase = await follow(northReader, afterUpdate.cursor);
      const tombstone = afterErase.entries.find((e) => e.resource === 'students')!;
      assert.deepEqual(tombstone, { resource: 'students', id: adaId, change: 'erased' });
      const res = await h.get(`/v1/changes?since=${afterUpdate.cursor}`, northReader);
      assert.ok(!res.body.includes(ada.email) && !res.body.includes('+441234567890'), 'the erased personal data is not in the feed');

      // Nothing since: an empty page, and the cursor stays usable.
      const idle = await page(northReader, '/v1/changes', { since: afterErase.cursor });
      assert.deepEqual([idle.changes, idle.has_more], [[], false]);
      // A replayed batch that changes nothing adds nothing.
      await write(northWriter, 'PUT', 'students', [{ ...ben, last_name: 'Renamed' }]);
      assert.deepEqual((await page(northReader, '/v1/changes', { since: idle.next_cursor })).changes, []);
      // The app's events on a student are changes too.
      assert.equal((await h.admin('POST', `/students/${benId}/sign-in`)).status, 200);
      assert.equal((await h.admin('POST', `/students/${benId}/graduation-date`, { graduation_date: '2020-06-30' })).status, 200);
      const events = await follow(northReader, idle.next_cursor);
      assert.deepEqual(events.entries.map((e) => [e.id, e.change, e.row?.account_status, e.row?.graduation_date]),
        [[benId, 'updated', 'claimed', '2020-06-30']]);
      // Reported in review: an event that changed nothing (a second sign-in, the date already
      // stored) was an `updated` entry, and moved updated_at, as a replayed batch is not.
      const [{ updated_at: before }] = await h.sql<{ updated_at: string }>('select updated_at::text from students where id = $1', [benId]);
      assert.equal((await h.admin('POST', `/students/${benId}/sign-in`)).status, 200);
      assert.equal((await h.admin('POST', `/students/${benId}/graduation-date`, { graduation_date: '2020-06-30' })).status, 200);
      assert.deepEqual((await page(northReader, '/v1/changes', { since: events.cursor! })).changes, []);
      assert.deepEqual(await h.sql('select updated_at::text from students where id = $1', [benId]), [{ updated_at: before }]);
    });

    test('replaying the feed from the start in small pages gives exactly what a full read shows', async () => {
      const rows = Array.from({ length: 7 }, () => student('replay', 'n-2025'));
      const { results } = await write(northWriter, 'PUT', 'students', rows);
      await write(northWriter, 'PATCH', 'students', rows.slice(0, 3).map((r) => ({ email: r.email, cohort_name: 'n-2026' })));
      await write(northWriter, 'PATCH', 'cohorts', [{ name: 'n-2026', display_name: 'Renamed cohort' }]);
      await erase(results[4].id);

      const mirror = new Mirror();
      const replay = await follow(northReader, null, { limit: 3 });
      mirror.apply(replay.entries);
      assert.deepEqual(mirror.of('students'), await fullRead(northReader, 'students'));
      assert.deepEqual(mirror.of('cohorts'), await fullRead(northReader, 'cohorts'));
      const positions = replay.entries.map((e) => `${e.resource}/${e.id}`);
      assert.equal(new Set(positions).size, positions.length, 'a row changed several times appears once, as it is now');
    });

    test('a resource\'s own feed holds only that resource, and its cursor is its own', async () => {
      const students = await follow(northReader, null, { path: '/v1/changes/students' });
      assert.ok(students.entries.length > 0);
      assert.ok(students.entries.every((e) => e.resource === 'students'));
      const mirror = new Mirror();
      mirror.apply(students.entries);
      assert.deepEqual(mirror.of('students'), await fullRead(northReader, 'students'));
      const cohorts = await follow(northReader, null, { path: '/v1/changes/cohorts' });
      assert.ok(cohorts.entries.every((e) => e.resource === 'cohorts'));
      const misused = await h.get(`/v1/changes?since=${students.cursor}`, northReader);
      assert.equal(misused.status, 400);
      assert.equal(misused.json.code, 'INVALID_CURSOR');
    });

    test('pages of every feed, tombstones included, and a refused cursor match the OpenAPI description', async () => {
      const v = new DescriptionValidator((await h.get('/v1/openapi.json', null)).json);
      for (const path of ['/v1/changes', '/v1/changes/students', '/v1/changes/cohorts']) {
        const res = await h.get(`${path}?limit=2`, consortiumReader);
        assert.equal(res.status, 200, res.body);
        assert.ok(res.json.changes.length > 0, path);
        assert.deepEqual(v.bodyProblems('GET', path, 200, res.json), [], path);
        const rest = await follow(consortiumReader, res.json.next_cursor, { path });
        assert.deepEqual(v.bodyProblems('GET', path, 200, { changes: rest.entries, next_cursor: rest.cursor, has_more: false }), [], path);
      }
      const refused = await h.get('/v1/changes?since=nonsense!', northReader);
      assert.deepEqual(v.bodyProblems('GET', '/v1/changes', 400, refused.json), []);
    });

    test('a malformed cursor, limit or parameter is a 400 with its catalogue code', async () => {
      const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const { cursor } = await follow(northReader, null);
      const position = decodeCursor('all', cursor!).get(north)!;
      const bytes = Buffer.from(binaryCursor('all', Object.fromEntries(decodeCursor('all', cursor!))), 'base64url');
      const withByte = (at: number, value: number) => Buffer.from(bytes.map((b, i) => (i === at ? value : b))).toString('base64url');
      const badCursors = [
        // The compact form, bytes: cut short, one byte more, another version, no such feed or resource, a university twice.
        bytes.subarray(0, bytes.length - 1).toString('base64url'), Buffer.concat([bytes, Buffer.of(0)]).toString('base64url'),
        withByte(0, 3), withByte(1, 9), withByte(2 + 16, 7), Buffer.concat([bytes, bytes.subarray(2)]).toString('base64url'),
        // The first form, JSON.
        'not a cursor!', 'e30', encode([1]), encode({ v: 2, feed: 'all', at: {} }), encode({ v: 1, feed: 'all', at: {}, extra: 1 }),
        encode({ v: 1, feed: 'all', at: { 'not-a-uuid': position } }), encode({ v: 1, feed: 'all', at: { [north]: [-1, 'students', north] } }),
        encode({ v: 1, feed: 'all', at: { [north]: [1.5, 'students', north] } }), encode({ v: 1, feed: 'all', at: { [north]: [1, 'resumes', north] } }),
        `${cursor}=`, Buffer.from('{"v":1,').toString('base64url'),
        // A position past the university's last change: kept, it would hide the changes up to it.
        encode({ v: 1, feed: 'all', at: { [north]: [position[0] + 1_000_000, position[1], position[2]] } }),
        // The same under the university's id in upper case: taken as another university's, it was dropped.
        encode({ v: 1, feed: 'all', at: { [north.toUpperCase()]: [position[0] + 1_000_000, position[1], position[2]] } }),
      ];
      for (const since of badCursors) {
        const res = await h.get(`/v1/changes?since=${encodeURIComponent(since)}`, northReader);
        assert.equal(res.status, 400, since);
        assert.equal(res.json.code, 'INVALID_CURSOR', since);
      }
      for (const query of ['limit=0', `limit=${LIMITS.changesPerResponse + 1}`, 'limit=ten', 'limit=1&limit=2', 'since=a&since=b', 'resource=students']) {
        const res = await h.get(`/v1/changes?${query}`, northReader);
        assert.equal(res.status, 400, query);
        assert.equal(res.json.code, 'INVALID_PARAMETER', query);
      }
      // A query string over the reads' limit is 414 here too: a 24 KB cursor was read.
      const long = await h.get(`/v1/changes?since=${'A'.repeat(LIMITS.maxQueryStringBytes)}`, northReader);
      assert.deepEqual([long.status, long.json.code], [414, 'URI_TOO_LONG']);
    });

    test('a consortium follows its members; a university never sees another\'s changes', async () => {
      const southRows = [student('south', 's-2025'), student('south', 's-2025')];
      const { results } = await write(southWriter, 'PUT', 'students', southRows);
      await erase(results[1].id);
      await write(northWriter, 'PUT', 'students', [student('north', 'n-2025')]);

      const mirror = new Mirror();
      const all = await follow(consortiumReader, null, { limit: 4 });
      mirror.apply(all.entries);
      assert.deepEqual(mirror.of('students'), await fullRead(consortiumReader, 'students'));
      assert.deepEqual(mirror.of('cohorts'), await fullRead(consortiumReader, 'cohorts'));
      assert.deepEqual([...decodeCursor('all', all.cursor!).keys()].sort(), [north, south].sort());
      // Each member's entries in turn, the members in id order, whatever pages they fall on.
      const universityOf = new Map((await h.sql<{ id: string; university_id: string }>(
        'select id, university_id from students union all select id, university_id from cohorts union all select id, university_id from change_tombstones')).map((r) => [r.id, r.university_id]));
      const order = all.entries.map((e) => universityOf.get(e.id));
      assert.deepEqual(order, [...order].sort(), 'members in id order');
      assert.ok(new Set(order).size === 2 && order.length > 4, 'both members, over several pages');

      const southIds = new Set((await h.sql<{ id: string }>('select id from students where university_id = $1 union all select id from cohorts where university_id = $1', [south])).map((r) => r.id));
      southIds.add(results[1].id);
      const northOnly = await follow(northReader, null);
      assert.ok(northOnly.entries.length > 0);
      assert.ok(northOnly.entries.every((e) => !southIds.has(e.id)), 'a south row reached a north token');
      // A consortium's cursor given to a university's token: the other member's position is not its to use.
      const narrowed = await page(northReader, '/v1/changes', { since: all.cursor! });
      assert.deepEqual([...decodeCursor('all', narrowed.next_cursor).keys()], [north]);
    });

    test('a cursor in the compact form reads on where the same positions in the first form (JSON), which every release reads, do', async () => {
      const { cursor } = await follow(consortiumReader, null);
      assert.equal(cursor, jsonCursor('all', Object.fromEntries(decodeCursor('all', cursor!))), 'a cursor that fits is given out in the first form');
      const compact = binaryCursor('all', Object.fromEntries(decodeCursor('all', cursor!)));
      await write(northWriter, 'PUT', 'students', [student('compact', 'n-2025')]);
      const [fromFirst, fromCompact] = [await follow(consortiumReader, cursor), await follow(consortiumReader, compact)];
      assert.equal(fromFirst.entries.length, 2, 'the student and its cohort');
      assert.deepEqual(fromCompact, fromFirst);
    });

    test(`a consortium of ${CURSOR_UNIVERSITIES} members that all changed is given a cursor it can send back: 130 were refused 414`, async () => {
      const [{ id: large }] = await h.sql<{ id: string }>("insert into consortia (name) values ('Large Consortium') returning id");
      const members = Array.from({ length: CURSOR_UNIVERSITIES }, () => randomUUID());
      // Rows listed, not selected: Citus runs INSERT … SELECT into a distributed table as a COPY, which row-level security refuses.
      const rows = (make: (i: number) => string) => members.map((_, i) => `(${make(i)})`).join(', ');
      await h.sql(`insert into universities (id, name, consortium_id) values ${rows((i) => `$${i + 2}::uuid, 'Large member ${i}', $1::uuid`)}`, [large, ...members]);
      await h.sql(`insert into tenants (university_id) values ${rows((i) => `$${i + 1}::uuid`)}`, members);
      await h.sql(`insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term)
        values ${rows((i) => `$${i + 1}::uuid, 'c', 'C', 'History', 'BA', '2025-09-01', '2029-06-30', 2025, 'Fall'`)}`, members);
      const reader = (await h.admin('POST', '/tokens', { consortium_id: large })).json.token as string;
      const { entries, cursor } = await follow(reader, null, { limit: LIMITS.changesPerResponse });
      assert.equal(entries.length, CURSOR_UNIVERSITIES);
      assert.equal(decodeCursor('all', cursor!).size, CURSOR_UNIVERSITIES);
      const next = await h.get(`/v1/changes?since=${cursor}&limit=${LIMITS.changesPerResponse}`, reader);
      assert.equal(next.status, 200, next.body);
      assert.deepEqual([next.json.changes, next.json.has_more], [[], false]);
    });

    test('a member with a backlog among quiet ones, read in a group: every entry comes once, the pages end where that member may hold more', async () => {
      const [{ id: mixed }] = await h.sql<{ id: string }>("insert into consortia (name) values ('Mixed Consortium') returning id");
      const members = Array.from({ length: 40 }, () => randomUUID()).sort();
      const rows = (items: readonly unknown[], make: (i: number) => string) => items.map((_, i) => `(${make(i)})`).join(', ');
      await h.sql(`insert into universities (id, name, consortium_id) values ${rows(members, (i) => `$${i + 2}::uuid, 'Mixed member ${i}', $1::uuid`)}`, [mixed, ...members]);
      await h.sql(`insert into tenants (university_id) values ${rows(members, (i) => `$${i + 1}::uuid`)}`, members);
      const cohortRow = (university: string, name: string) => `'${university}'::uuid, '${name}', 'C', 'History', 'BA', '2025-09-01', '2029-06-30', 2025, 'Fall'`;
      const backlog = Array.from({ length: 300 }, (_, i) => `backlog-${i}`);
      // Member 20 is read in the group of 16, each asked for 125 entries: its 301 cohorts end two pages early.
      await h.sql(`insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term)
        values ${rows(members, (i) => cohortRow(members[i], 'c'))}, ${rows(backlog, (i) => cohortRow(members[20], backlog[i]))}`);
      const reader = (await h.admin('POST', '/tokens', { consortium_id: mixed })).json.token as string;
      const pages: Page[] = [];
      for (let since: string | null = null; ;) {
        const p = await page(reader, '/v1/changes', { limit: '500', ...(since ? { since } : {}) });
        pages.push(p);
        since = p.next_cursor;
        if (!p.has_more) break;
      }
      const ids = pages.flatMap((p) => p.changes.map((e) => e.id));
      assert.equal(ids.length, members.length + backlog.length);
      assert.equal(new Set(ids).size, ids.length, 'an entry came twice');
      assert.ok(pages.length > 1 && pages[0].changes.length < 500, `pages of ${pages.map((p) => p.changes.length).join(', ')}`);
      const mirror = new Mirror();
      for (const p of pages) mirror.apply(p.changes);
      assert.deepEqual(mirror.of('cohorts'), await fullRead(reader, 'cohorts'));
    });

    test('one university\'s page holds as many entries as its limit asks, beyond the share a member of a group is asked for', async () => {
      const university = (await h.admin('POST', '/universities', { name: 'Busy University' })).json.id as string;
      const reader = (await h.admin('POST', '/tokens', { university_id: university })).json.token as string;
      const names = Array.from({ length: 2_100 }, (_, i) => `busy-${i}`);
      await h.sql(`insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term)
        values ${names.map((name) => `('${university}'::uuid, '${name}', 'C', 'History', 'BA', '2025-09-01', '2029-06-30', 2025, 'Fall')`).join(', ')}`);
      const first = await page(reader, '/v1/changes', { limit: '2050' });
      assert.deepEqual([first.changes.length, first.has_more], [2_050, true]);
      const rest = await page(reader, '/v1/changes', { limit: '2050', since: first.next_cursor });
      assert.deepEqual([rest.changes.length, rest.has_more], [50, false]);
    });

    test('a cursor outlives the app that gave it out', async () => {
      const { cursor } = await follow(northReader, null);
      const fresh = student('restart', 'n-2025');
      await write(northWriter, 'PUT', 'students', [fresh]);
      // Another app, on a connection of its own where the store is a server; PGlite has one session.
      const store = backend === 'pglite' ? h.store : openPostgresStore(h.testStore.url!, 2);
      const restarted = await buildApp({ adminKey: ADMIN_KEY, redisUrl: undefined, readLimitPerMin: 100_000, writeLimitPerMin: 100_000, logLevel: 'silent' },
        new Database(store, 5_000));
      try {
        const res = await restarted.inject({ method: 'GET', url: `/v1/changes?since=${cursor}`, headers: { authorization: `Bearer ${northReader}` } });
        assert.equal(res.statusCode, 200, res.body);
        const students = (res.json() as Page).changes.filter((e) => e.resource === 'students');
        assert.deepEqual(students.map((e) => [e.row!.email, e.change]), [[fresh.email, 'created']]);
      } finally {
        await restarted.close();
        if (store !== h.store) await store.close();
      }
    });

    test('a reader following the feed while writers run batches and erasures skips no change', async () => {
      const mirror = new Mirror();
      const start = await follow(consortiumReader, null);
      mirror.apply(start.entries);
      let cursor = start.cursor;

      const created: string[] = [];
      const writer = async (token: string, cohortNames: [string, string], tag: string) => {
        for (let round = 0; round < 6; round++) {
          const rows = Array.from({ length: 20 }, () => student(`${tag}${round}`, cohortNames[0]));
          const { results } = await write(token, 'PUT', 'students', rows);
          created.push(...results.map((r: { id: string }) => r.id));
          await write(token, 'PATCH', 'students', rows.slice(0, 10).map((r) => ({ email: r.email, cohort_name: cohortNames[1], last_name: `Moved ${round}` })));
          await erase(results[round].id);
          // The reader reads while the other writer goes on: every round is followed by a read.
          await nextRead();
        }
      };
      let writing = true;
      let pagesWithChanges = 0;
      let readWaiters: (() => void)[] = [];
      const nextRead = () => new Promise<void>((resolve) => readWaiters.push(resolve));
      const reader = async () => {
        while (writing) {
          const waiting = readWaiters;
          readWaiters = [];
          const p = await follow(consortiumReader, cursor, { limit: 25 });
          if (p.entries.length > 0) pagesWithChanges++;
          mirror.apply(p.entries);
          cursor = p.cursor;
          for (const resume of waiting) resume();
          // A turn for the writers: on PGlite every step of a read can be a microtask.
          await setImmediate();
        }
      };
      const readerDone = reader();
      await write(southWriter, 'PUT', 'cohorts', [cohort('s-2026')]);
      await Promise.all([writer(northWriter, ['n-2025', 'n-2026'], 'cn'), writer(southWriter, ['s-2025', 's-2026'], 'cs')]).finally(() => {
        writing = false;
      });
      await readerDone;
      assert.ok(pagesWithChanges > 1, 'the reader never read while the writers wrote: the test proves nothing');
      mirror.apply((await follow(consortiumReader, cursor, { limit: 25 })).entries);

      assert.deepEqual(mirror.of('students'), await fullRead(consortiumReader, 'students'));
      assert.deepEqual(mirror.of('cohorts'), await fullRead(consortiumReader, 'cohorts'));
      assert.ok(created.every((id) => mirror.seen.has(`students/${id}`)), 'a created student never reached the reader');
    });
  });
}

/** The embedded store as a backup made it. */
async function restoredStore(backup: Blob) {
  const store = await openPgliteStore({ loadDataDir: backup, waitMs: 5_000 });
  return { store, drop: () => store.close() };
}

describe('a cursor given out before the database was restored from a backup', () => {
  test('is 400 INVALID_CURSOR, also once new changes passed its position: it skipped them and kept rows the restore took away', async () => {
    const h = await Harness.start('pglite');
    const university = (await h.admin('POST', '/universities', { name: 'Restored University' })).json.id;
    const writer = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
    const reader = (await h.admin('POST', '/tokens', { university_id: university })).json.token;
    const put = async (app: Harness, resource: 'students' | 'cohorts', rows: unknown[]) => {
      const res = await app.request({
        method: 'PUT', url: `/v1/${resource}`, headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ [resource]: rows }),
      });
      assert.equal(res.status, 200, res.body);
    };
    const students = (...tags: string[]) => tags.map((tag) => ({ email: `${tag}@restored.example.edu`, first_name: 'R', last_name: tag, cohort_name: 'r-2025', is_alumni: false }));
    const feedPage = async (app: Harness, since: string | null) => app.get(`/v1/changes${since ? `?since=${since}` : ''}`, reader);
    let restored: Harness | null = null;
    try {
      await put(h, 'cohorts', [cohort('r-2025')]);
      await put(h, 'students', students('a', 'b'));
      const backup = await (h.store as Store & { dump(): Promise<Blob> }).dump();
      for (const tag of ['c', 'd', 'e']) await put(h, 'students', students(tag));
      const head = await feedPage(h, null);
      assert.equal(head.json.has_more, false);
      const cursor: string = head.json.next_cursor;

      restored = await Harness.over('pglite', await restoredStore(backup));
      assert.equal((await feedPage(restored, cursor)).json.code, 'INVALID_CURSOR', 'past the last change at once');
      // Four changes later the restored history has drawn the cursor's numbers again.
      for (const tag of ['f', 'g', 'h', 'i']) await put(restored, 'students', students(tag));
      const stale = await feedPage(restored, cursor);
      assert.deepEqual([stale.status, stale.json.code], [400, 'INVALID_CURSOR'], stale.body);
      assert.match(stale.json.message, /restored from a backup/);
      // From the start, the feed holds what a full read does.
      assert.equal((await feedPage(restored, null)).json.changes.filter((e: Entry) => e.resource === 'students').length, 6);
    } finally {
      await restored?.close();
      await h.close();
    }
  });
});
