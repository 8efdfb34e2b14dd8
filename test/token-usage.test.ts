import assert from 'node:assert/strict';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Database } from '../src/db/database.ts';
import type { Queryable } from '../src/db/store.ts';
import { TokenAuthenticator } from '../src/domain/tokens.ts';
import { eventually } from './support/eventually.ts';
import { Harness, storeBackends } from './support/harness.ts';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}$/;
const MINUTE_MS = 60_000;
const twoMinutesAgo = () => new Date(Date.now() - 2 * MINUTE_MS).toISOString();

for (const backend of storeBackends()) {
  describe(`token last_used_at and expiry on ${backend}`, () => {
    let h: Harness;
    let universityId: string;
    let serial = 0;

    before(async () => {
      h = await Harness.start(backend);
      universityId = (await h.admin('POST', '/universities', { name: `Usage University ${backend}` })).json.id;
    });
    after(() => h.close());

    const issue = async (body: Record<string, unknown> = {}) => {
      const res = await h.admin('POST', '/tokens', { university_id: universityId, label: `usage ${++serial}`, ...body });
      assert.equal(res.status, 201);
      return res.json as { id: string; token: string };
    };
    /** last_used_at as the operator API lists it. */
    const lastUsed = async (id: string): Promise<string | null> => {
      const listed = await h.admin('GET', `/tokens?university_id=${universityId}&limit=1000`);
      return listed.json.items.find((t: { id: string }) => t.id === id).last_used_at;
    };
    // A time computed here: Citus refuses a STABLE function of a column (timestamptz - interval) in an UPDATE.
    const ageLastUse = (id: string) => h.sql('update tokens set last_used_at = $2::timestamptz where id = $1', [id, twoMinutesAgo()]);

    test('a partner request records last_used_at after its response', async () => {
      const token = await issue();
      assert.equal(await lastUsed(token.id), null);
      assert.equal((await h.get('/v1/campuses', token.token)).status, 200);
      await eventually(async () => (await lastUsed(token.id)) !== null, 10_000, 'last_used_at recorded');
      assert.match(String(await lastUsed(token.id)), RFC3339);
    });

    test('two uses within a minute write once; after the minute the next use writes again', async () => {
      const token = await issue();
      const clock = { now: Date.now() };
      const instance = new TokenAuthenticator(h.db, { now: () => clock.now });
      const principal = await instance.authenticate(token.token);
      assert.ok(principal);
      instance.recordUse(principal.tokenId);
      await instance.settled();
      const first = await lastUsed(token.id);
      assert.match(String(first), RFC3339);

      // Aged in the store, the record no longer holds the next write back; only the instance's memory can.
      await ageLastUse(token.id);
      const aged = await lastUsed(token.id);
      clock.now += MINUTE_MS - 1;
      instance.recordUse(principal.tokenId);
      await instance.settled();
      assert.equal(await lastUsed(token.id), aged);

      clock.now += 1;
      instance.recordUse(principal.tokenId);
      await instance.settled();
      const updated = await lastUsed(token.id);
      assert.ok(Date.parse(String(updated)) > Date.parse(String(aged)) + MINUTE_MS, `${updated} after ${aged}`);
    });

    test('another instance does not write again within the minute: the statement skips a fresh record', async () => {
      const token = await issue();
      const first = new TokenAuthenticator(h.db);
      const second = new TokenAuthenticator(h.db);
      first.recordUse(token.id);
      await first.settled();
      const written = await lastUsed(token.id);
      assert.notEqual(written, null);
      await sleep(5);
      second.recordUse(token.id);
      await second.settled();
      assert.equal(await lastUsed(token.id), written);
    });

    test('HTTP: the second request within the minute leaves last_used_at alone', async () => {
      const own = await Harness.start(backend);
      try {
        const university = (await own.admin('POST', '/universities', { name: 'Own Usage University' })).json;
        const token = (await own.admin('POST', '/tokens', { university_id: university.id })).json;
        assert.equal((await own.get('/v1/campuses', token.token)).status, 200);
        // Recorded after the response; on a loaded Citus cluster it took over a second.
        await eventually(async () => (await own.sql('select 1 from tokens where id = $1 and last_used_at is not null', [token.id])).length === 1,
          10_000, 'last_used_at recorded');
        await own.sql('update tokens set last_used_at = $2::timestamptz where id = $1', [token.id, twoMinutesAgo()]);
        const [aged] = await own.sql<{ at: string }>(`select to_json(last_used_at) #>> '{}' as at from tokens where id = $1`, [token.id]);
        assert.equal((await own.get('/v1/universities', token.token)).status, 200);
        // The response's own onResponse hook has run by the next turn; closing awaits any write it began.
        await nextTurn();
        await own.app.close();
        const [now] = await own.sql<{ at: string }>(`select to_json(last_used_at) #>> '{}' as at from tokens where id = $1`, [token.id]);
        assert.equal(now.at, aged.at);
      } finally {
        // Closed already unless an assertion failed first; an open app would keep the test process alive.
        await own.close();
      }
    });

    test('a cached token is refused from its expiry on, within the cache time', async () => {
      const clock = { now: Date.now() };
      const token = await issue({ expires_at: new Date(clock.now + 2_000).toISOString() });
      const instance = new TokenAuthenticator(h.db, { now: () => clock.now });
      assert.ok(await instance.authenticate(token.token));
      clock.now += 2_000;
      assert.ok(TokenAuthenticator.CACHE_MS > 2_000);
      assert.equal(await instance.authenticate(token.token), null);
    });
  });
}

/** A token's row as the lookup reads it (src/domain/tokens.ts). */
const row = { id: '7d1c3c8e-2b8a-4a4e-9a3e-0c1d2e3f4a5b', university_id: '0e5f2c1a-3b4d-4e6f-8a9b-1c2d3e4f5a6b', consortium_id: null, can_write: false, expires_at_ms: null, university_ids: ['0e5f2c1a-3b4d-4e6f-8a9b-1c2d3e4f5a6b'] };

describe('token lookups', () => {
  test("the requests that find a token's entry expired together share one lookup", async () => {
    const clock = { now: Date.now() };
    let lookups = 0;
    const db = {
      asOperator: async <T>(fn: (tx: Queryable) => Promise<T>) => {
        lookups += 1;
        return fn({ query: async () => [row] } as unknown as Queryable);
      },
    } as unknown as Database;
    const instance = new TokenAuthenticator(db, { now: () => clock.now });
    const together = () => Promise.all(Array.from({ length: 8 }, () => instance.authenticate('pds_any-token')));
    assert.deepEqual((await together()).map((principal) => principal?.tokenId), Array(8).fill(row.id));
    assert.equal(lookups, 1);
    await together();
    assert.equal(lookups, 1);
    clock.now += TokenAuthenticator.CACHE_MS + 1;
    assert.deepEqual((await together()).map((principal) => principal?.tokenId), Array(8).fill(row.id));
    assert.equal(lookups, 2);
  });
});

describe('a revocation during a lookup of its token', () => {
  test('takes effect at the next request: the lookup under way, which read the token active, is not cached (it was, for the cache time)', async () => {
    let lookups = 0;
    let active = true;
    let release = () => {};
    const db = {
      asOperator: async <T>(fn: (tx: Queryable) => Promise<T>) => {
        lookups += 1;
        const found = active ? [row] : [];
        if (lookups === 1) await new Promise<void>((resolve) => { release = resolve; });
        return fn({ query: async () => found } as unknown as Queryable);
      },
    } as unknown as Database;
    const instance = new TokenAuthenticator(db);
    const inFlight = instance.authenticate('pds_any-token');
    await new Promise((resolve) => setImmediate(resolve));
    // The operator API revokes the token and forgets it while the lookup is still under way.
    active = false;
    instance.forget(row.id);
    const joinedAfter = instance.authenticate('pds_any-token');
    release();
    assert.equal((await inFlight)?.tokenId, row.id);
    assert.equal(await joinedAfter, null);
    assert.equal(await instance.authenticate('pds_any-token'), null);
    assert.equal(lookups, 2);
  });
});

describe('recording a use never fails or holds up the request', () => {
  /** A store that finds the token and then fails or hangs on the write. */
  const storeWhoseWrites = (write: () => Promise<never>): Database => ({
    asOperator: <T>(fn: (tx: Queryable) => Promise<T>) => fn({
      query: async (text: string) => (text.trim().startsWith('update') ? write() : [row]),
    } as unknown as Queryable),
  }) as unknown as Database;

  test('a failed write is logged with the token id and its code, and thrown to no one', async () => {
    const warnings: Record<string, unknown>[] = [];
    const failure = Object.assign(new Error('connection lost'), { code: '08006' });
    const instance = new TokenAuthenticator(storeWhoseWrites(() => Promise.reject(failure)), { log: { warn: (details) => warnings.push(details) } });
    const principal = await instance.authenticate('pds_any-token');
    assert.equal(principal?.tokenId, row.id);
    instance.recordUse(row.id);
    await instance.settled();
    assert.deepEqual(warnings, [{ tokenId: row.id, code: '08006' }]);
  });

  test('a write that never answers holds up neither the caller nor the next authentication', async () => {
    const instance = new TokenAuthenticator(storeWhoseWrites(() => new Promise<never>(() => {})));
    const principal = await instance.authenticate('pds_any-token');
    assert.ok(principal);
    instance.recordUse(principal.tokenId);
    assert.equal((await instance.authenticate('pds_any-token'))?.tokenId, row.id);
    const write = await Promise.race([instance.settled().then(() => 'finished'), nextTurn().then(() => 'under way')]);
    assert.equal(write, 'under way');
  });
});
