/**
 * Store.readAsReader: a partner's read on a session that holds the role and the scope
 * (PostgreSQL; on Citus one university's, on its node), or in a transaction with them (PGlite,
 * Citus). Each read sees its own scope and
 * nothing else, whatever the session read before; a scope change that fails returns nothing read
 * under the old one; no statement on a reader session runs outside row-level security. When every
 * session is in use, a read of a busy session's scope is sent behind the read in flight there.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { Database, type Scope } from '../src/db/database.ts';
import { NODE_READER_ROLE, openPostgresStore } from '../src/db/postgres-store.ts';
import { SessionPool } from '../src/db/session-pool.ts';
import { loadDemo } from '../src/domain/demo.ts';
import { DEFAULT_STORE_TIMEOUTS, type ReaderBinding, type Store } from '../src/db/store.ts';
import { type TestStore, openTestStore, storeBackends } from './support/harness.ts';

let UNIVERSITIES: string[] = [];
let ONE: Scope;
let OTHER: Scope;
let BOTH: Scope;

/** The demo's universities (a table under row-level security), the first three as the scopes read in. */
async function seedUniversities(db: Database): Promise<void> {
  const demo = await db.asOperator((tx) => loadDemo(tx, { students: 10 }));
  UNIVERSITIES = demo.universities.slice(0, 3).map((u) => u.id);
  [ONE, OTHER, BOTH] = [[UNIVERSITIES[0]], [UNIVERSITIES[1]], [UNIVERSITIES[0], UNIVERSITIES[2]]].map((ids) => ({ universityIds: ids }));
}

/** A partner's read as the service makes one (Database.readAsPartner), its rows as objects. */
const readAs = <T>(db: Database, scope: Scope, text: string, params: (string | null)[]) =>
  db.store.readAsReader(db.partnerReader(scope), 'objects', text, params) as Promise<T[]>;

/** The universities a read sees, with no filter of its own. */
const VISIBLE = `(select coalesce(array_agg(id::text order by id::text), '{}') from universities) as visible`;
const scopeAndRows = `select current_setting('pds.scope') as scope, current_user as role, ${VISIBLE}`;

for (const backend of storeBackends()) {
  describe(`partner reads on reader sessions on ${backend}`, () => {
    let testStore: TestStore;
    let db: Database;
    before(async () => {
      testStore = await openTestStore(backend);
      db = new Database(testStore.store, 5_000);
      await seedUniversities(db);
    });
    after(() => testStore.drop());

    const read = async (scope: Scope) => {
      const [row] = await readAs<{ scope: string; role: string; visible: string[] }>(db, scope, scopeAndRows, []);
      return row;
    };

    test('a read runs as pds_app (on a Citus node, as its reader role) within its scope, and a statement with no tenant filter sees only the scope\'s rows', async () => {
      const role = backend === 'citus' ? NODE_READER_ROLE : 'pds_app';
      assert.deepEqual({ ...(await read(ONE)) }, { scope: UNIVERSITIES[0], role, visible: [UNIVERSITIES[0]] });
      assert.deepEqual((await read(BOTH)).visible, [...BOTH.universityIds].sort());
    });

    test('reads of different scopes at once each see their own scope, however sessions are shared', async () => {
      const scopes = Array.from({ length: 60 }, (_, i) => [ONE, OTHER, BOTH][i % 3]);
      const rows = await Promise.all(scopes.map(read));
      rows.forEach((row, i) => {
        assert.equal(row.scope, scopes[i].universityIds.join(','));
        assert.deepEqual(row.visible, [...scopes[i].universityIds].sort());
      });
    });

    test('a failing statement answers its own error, and the next read is served', async () => {
      for (let i = 0; i < 3; i++) {
        await assert.rejects(readAs(db, ONE, 'select $1::integer', ['not a number']), { code: '22P02' });
        assert.equal((await read(ONE)).scope, UNIVERSITIES[0]);
      }
    });

    test('a write is refused', async () => {
      await assert.rejects(readAs(db, ONE, `update universities set name = name || '' where id = $1`, [UNIVERSITIES[0]]), { code: '25006' });
    });
  });
}

// The session state itself: only a PostgreSQL server's reader sessions hold it.
if (storeBackends().includes('postgres')) {
  describe('reader sessions on postgres', () => {
    let testStore: TestStore;
    let store: Store;
    let db: Database;
    before(async () => {
      testStore = await openTestStore('postgres');
      // One session, so that every read meets what the one before it left.
      store = openPostgresStore(testStore.url!, 1);
      db = new Database(store, 5_000);
      await seedUniversities(db);
    });
    after(async () => {
      await store.close();
      await testStore.drop();
    });

    test('a scope change that fails returns nothing read under the old scope, and the session is not used again', async () => {
      const [before] = await readAs<{ pid: number }>(db, ONE, 'select pg_backend_pid() as pid', []);
      // The same binding as a partner's read, with a setting name the server refuses.
      const binding = db.partnerReader(OTHER);
      const refused: ReaderBinding = { ...binding, scope: { ...binding.scope, setting: 'not a setting name' } };
      await assert.rejects(store.readAsReader(refused, 'objects', scopeAndRows, []), { code: '42704' });
      const [after] = await readAs<{ pid: number; visible: string[] }>(db, OTHER, `select pg_backend_pid() as pid, ${VISIBLE}`, []);
      assert.notEqual(after.pid, before.pid);
      assert.deepEqual(after.visible, [UNIVERSITIES[1]]);
    });

    /** `check` on a store of its own with `maxConnections` in each pool and a wait of `poolWaitMs` for a free one. */
    const onStore = async (maxConnections: number, poolWaitMs: number, check: (onDb: Database, on: Store) => Promise<void>) => {
      const on = openPostgresStore(testStore.url!, maxConnections, { ...DEFAULT_STORE_TIMEOUTS, poolWaitMs });
      try {
        await check(new Database(on, 5_000), on);
      } finally {
        await on.close();
      }
    };

    /**
     * `check` on a store of one reader session whose wait for a free one (50 ms) is far shorter
     * than a read in flight: only a read that shares the session is served.
     */
    const onSharingStore = (check: (sharingDb: Database, sharing: Store) => Promise<void>) => onStore(1, 50, check);

    test('when its one session is busy, a read of the same scope is sent behind the read in flight instead of waiting for it, one at most', async () => {
      await onSharingStore(async (sharingDb, sharing) => {
        await readAs(sharingDb, ONE, 'select 1', []);
        const slow = readAs<{ pid: number }>(sharingDb, ONE, 'select pg_backend_pid() as pid from pg_sleep(0.4)', []);
        // The slow read holds the session and is on its way before the others are sent.
        await pause(100);
        const behind = readAs<{ pid: number; visible: string[] }>(sharingDb, ONE, `select pg_backend_pid() as pid, ${VISIBLE}`, []);
        const third = readAs(sharingDb, ONE, 'select 1', []);
        const otherScope = readAs(sharingDb, OTHER, 'select 1', []);
        await pause(10);
        assert.deepEqual(sharing.poolStats(), { inUse: 1, waiting: 2, shared: 1 });
        await Promise.all([assert.rejects(third, { code: 'POOL_TIMEOUT' }), assert.rejects(otherScope, { code: 'POOL_TIMEOUT' })]);
        const [[first], [second]] = await Promise.all([slow, behind]);
        assert.deepEqual({ ...second }, { pid: first.pid, visible: [UNIVERSITIES[0]] });
      });
    });

    test('the reads of one scope hold at most its share of the reader sessions: another university\'s read is served while they run', async () => {
      // Five sessions, a share of four; a wait for a free one (300 ms) far shorter than ONE's reads.
      await onStore(5, 300, async (fairDb, fair) => {
        // Four sessions that hold ONE's scope, so that a read of ONE can share them.
        await Promise.all(Array.from({ length: 4 }, () => readAs(fairDb, ONE, 'select 1', [])));
        const slow = Array.from({ length: 4 }, () => readAs(fairDb, ONE, 'select 1 from pg_sleep(1)', []));
        await pause(50);
        slow.push(readAs(fairDb, ONE, 'select 1 from pg_sleep(1)', []));
        await pause(50);
        assert.deepEqual(fair.poolStats(), { inUse: 4, waiting: 0, shared: 1 });
        const [other] = await readAs<{ visible: string[] }>(fairDb, OTHER, `select ${VISIBLE}`, []);
        assert.deepEqual(other.visible, [UNIVERSITIES[1]]);
        await Promise.all(slow);
      });
    });

    test('two universities\' slow reads leave the last sessions to a scope that holds none: a third scope\'s read is served while they run', async () => {
      // Ten sessions: ONE takes its share of eight, OTHER one of the last two, BOTH the last.
      await onStore(10, 300, async (fairDb, fair) => {
        const slow = (scope: Scope) => Array.from({ length: 10 }, () => readAs(fairDb, scope, 'select 1 from pg_sleep(1)', []));
        const ones = slow(ONE);
        await pause(50);
        const settled = Promise.allSettled([...ones, ...slow(OTHER)]);
        await pause(50);
        assert.deepEqual(fair.poolStats(), { inUse: 9, waiting: 11, shared: 0 });
        const third = await readAs<{ visible: string[] }>(fairDb, BOTH, `select ${VISIBLE}`, []).then(([row]) => ({ ...row }), (error: Error) => error);
        const served = (await settled).filter((s) => s.status === 'fulfilled').length;
        assert.deepEqual(third, { visible: [...BOTH.universityIds].sort() });
        assert.equal(served, 9);
      });
    });

    test('a partner\'s reads in a transaction (single objects, streamed pages, the change feed) hold at most the scope\'s share of the store\'s connections too', async () => {
      await onStore(5, 300, async (fairDb, fair) => {
        const slow = Array.from({ length: 4 }, () => fairDb.asPartner(ONE, (tx) => tx.query('select pg_sleep(1)'), { readOnly: true }));
        await pause(50);
        const beyond = fairDb.asPartner(ONE, (tx) => tx.query('select 1'), { readOnly: true });
        await pause(50);
        assert.deepEqual(fair.poolStats(), { inUse: 4, waiting: 1, shared: 0 });
        const [other] = await fairDb.asPartner(OTHER, (tx) => tx.query<{ visible: string[] }>(`select ${VISIBLE}`), { readOnly: true });
        assert.deepEqual(other.visible, [UNIVERSITIES[1]]);
        await assert.rejects(beyond, { code: 'POOL_TIMEOUT', message: /hold their share/ });
        await Promise.all(slow);
      });
    });

    test('a read of a scope whose share of sessions is busy waits for one of them within the pool wait, then is refused', async () => {
      // Two sessions, a share of one.
      await onStore(2, 600, async (fairDb, fair) => {
        await readAs(fairDb, ONE, 'select 1', []);
        // ONE's session and a read sent behind it: the next waits for it, though a session is free.
        const busy = async (seconds: number) => {
          const first = readAs(fairDb, ONE, `select 1 from pg_sleep(${seconds})`, []);
          await pause(50);
          return [first, readAs(fairDb, ONE, `select 1 from pg_sleep(${seconds})`, [])];
        };
        const short = await busy(0.2);
        const waiting = readAs<{ scope: string }>(fairDb, ONE, `select current_setting('pds.scope') as scope`, []);
        await pause(20);
        assert.deepEqual(fair.poolStats(), { inUse: 1, waiting: 1, shared: 1 });
        assert.equal((await waiting)[0].scope, UNIVERSITIES[0]);
        await Promise.all(short);
        const long = await busy(1);
        await assert.rejects(readAs(fairDb, ONE, 'select 1', []), { code: 'POOL_TIMEOUT' });
        await Promise.all(long);
      });
    });

    test('a shared session goes back to the pool only once the read sharing it has its answer: the next owner finds nothing in flight', async () => {
      // postgres.js sends a statement whose cached plan the server refused once more at the end
      // of its pipeline: behind the next owner's scope change, it would run in that scope.
      const pool = new SessionPool(testStore.url!, { ...DEFAULT_STORE_TIMEOUTS, maxConnections: 1 });
      try {
        const owner = await pool.lease();
        const owned = owner.send('objects', 'select pg_sleep(0.1)');
        const shared = pool.share(() => true, 'any scope');
        assert.ok(shared);
        // As a read does (readOnReaderSession), the shared lease ends with its answer.
        const behind = shared.send('objects', 'select pg_sleep(0.2)').finally(() => pool.release(shared));
        await owned;
        pool.release(owner);
        const next = await pool.lease();
        const { inFlight } = next.session;
        const answered = await Promise.race([behind.then(() => true), pause(10).then(() => false)]);
        await behind;
        pool.release(next);
        assert.deepEqual({ answered, inFlight }, { answered: true, inFlight: 0 }, 'the next lease came before the shared read was answered');
      } finally {
        await pool.close();
      }
    });

    test('a read never shares a session whose scope is changing: it waits, and sees its own scope', async () => {
      await readAs(db, ONE, 'select 1', []);
      // The one session changes to OTHER; a read of ONE sent behind that change would see OTHER's rows.
      const changing = readAs<{ visible: string[] }>(db, OTHER, `select ${VISIBLE} from pg_sleep(0.3)`, []);
      await pause(100);
      const waiting = readAs<{ visible: string[] }>(db, ONE, `select ${VISIBLE}`, []);
      const [[changed], [waited]] = await Promise.all([changing, waiting]);
      assert.deepEqual([changed.visible, waited.visible], [[UNIVERSITIES[1]], [UNIVERSITIES[0]]]);
    });

    test('a session holds its new scope once the change is confirmed: a read of that scope shares it while the statement sent with the change still runs', async () => {
      await onSharingStore(async (sharingDb) => {
        await readAs(sharingDb, ONE, 'select 1', []);
        // The one session changes to OTHER, and reads slowly once the change is answered.
        const slow = readAs<{ pid: number }>(sharingDb, OTHER, 'select pg_backend_pid() as pid from pg_sleep(0.4)', []);
        await pause(100);
        const behind = readAs<{ pid: number; visible: string[] }>(sharingDb, OTHER, `select pg_backend_pid() as pid, ${VISIBLE}`, []);
        const [[first], [second]] = await Promise.all([slow, behind]);
        assert.deepEqual({ ...second }, { pid: first.pid, visible: [UNIVERSITIES[1]] });
      });
    });

    test('the role is the session\'s own: RESET ROLE and RESET ALL keep it, and an empty scope sees nothing', async () => {
      await readAs(db, ONE, 'select 1', []);
      for (const reset of ['reset role', 'reset all']) {
        await readAs(db, ONE, reset, []);
        const [afterReset] = await readAs<{ role: string; visible: string[] }>(db, ONE,
          `select current_user as role, ${VISIBLE}`, []);
        assert.equal(afterReset.role, 'pds_app');
        // RESET ALL returns the scope to its startup value, which the session's record does not
        // know of: the read sees no university rather than another's.
        assert.deepEqual(afterReset.visible, reset === 'reset all' ? [] : [UNIVERSITIES[0]]);
      }
    });

    test('a reader session that runs as another role than its binding names fails the read', async () => {
      // `role=none` at start leaves the session as the login role, as a pooler that drops the
      // role parameter would.
      // A consortium without members has the empty scope, a new session's own: its first read is checked too.
      for (const scope of [ONE, { universityIds: [] }]) {
        const loginRoleStore = openPostgresStore(testStore.url!, 1);
        try {
          const binding = db.partnerReader(scope);
          const unbound: ReaderBinding = { ...binding, startupParameters: { ...binding.startupParameters, role: 'none' } };
          await assert.rejects(loginRoleStore.readAsReader(unbound, 'objects', scopeAndRows, []), /runs as postgres/);
        } finally {
          await loginRoleStore.close();
        }
      }
    });

    test('with reader sessions off a read runs in a transaction of its own, and its session keeps no scope', async () => {
      const transactional = openPostgresStore(testStore.url!, 1, undefined, { readerSessions: false });
      try {
        const offDb = new Database(transactional, 5_000);
        const [row] = await readAs<{ pid: number; role: string; visible: string[] }>(offDb, ONE,
          `select pg_backend_pid() as pid, current_user as role, ${VISIBLE}`, []);
        assert.deepEqual({ role: row.role, visible: row.visible }, { role: 'pds_app', visible: [UNIVERSITIES[0]] });
        // The store's one plain session served the read: no reader pool was opened.
        const [idle] = await transactional.query<{ pid: number; own: boolean; scope: string | null }>(
          `select pg_backend_pid() as pid, current_user = session_user as own, nullif(current_setting('pds.scope', true), '') as scope`);
        assert.deepEqual({ ...idle }, { pid: row.pid, own: true, scope: null });
      } finally {
        await transactional.close();
      }
    });
  });
}

// One university's read on Citus runs on a reader session of the node holding its shard
// (src/db/citus-read-routes.ts), pooled as on PostgreSQL.
if (storeBackends().includes('citus')) {
  describe('reader sessions on a Citus node', () => {
    let testStore: TestStore;
    before(async () => {
      testStore = await openTestStore('citus');
      await seedUniversities(new Database(testStore.store, 5_000));
    });
    after(() => testStore.drop());

    test('when its node\'s one session is busy, a read of the same university is sent behind the read in flight, on that session, one at most', async () => {
      // One session per node and a wait for a free one far shorter than the read in flight.
      const sharing = openPostgresStore(testStore.url!, 1, { ...DEFAULT_STORE_TIMEOUTS, poolWaitMs: 50 });
      try {
        const sharingDb = new Database(sharing, 5_000);
        const [{ node }] = await readAs<{ node: string }>(sharingDb, ONE, `select current_setting('port') as node`, []);
        const slow = readAs<{ pid: number }>(sharingDb, ONE, 'select pg_backend_pid() as pid from pg_sleep(0.4)', []);
        await pause(100);
        const behind = readAs<{ pid: number; node: string; role: string; visible: string[] }>(sharingDb, ONE,
          `select pg_backend_pid() as pid, current_setting('port') as node, current_user as role, ${VISIBLE}`, []);
        const third = readAs(sharingDb, ONE, 'select 1', []);
        await pause(10);
        assert.equal(sharing.poolStats().shared, 1);
        await assert.rejects(third, { code: 'POOL_TIMEOUT' });
        const [[first], [second]] = await Promise.all([slow, behind]);
        assert.deepEqual({ ...second }, { pid: first.pid, node, role: NODE_READER_ROLE, visible: [UNIVERSITIES[0]] });
        // The node is a worker, not the coordinator the store was opened on.
        const [{ coordinator }] = await sharing.query<{ coordinator: string }>('select inet_server_port()::text as coordinator');
        assert.notEqual(node, coordinator);
      } finally {
        await sharing.close();
      }
    });
  });
}
