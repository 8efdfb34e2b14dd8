/**
 * Idempotency keys on writes, through HTTP on each backend: the first request is processed and its
 * answer kept; a repeat gets the same status and body with Idempotent-Replayed and writes nothing;
 * another request under the key is 422; a repeat while the first runs is 409 with Retry-After; a
 * lease that ran out is taken over and the first write then rolls back; expired keys are free
 * again and purged; a new app on the same store replays; tokens and universities do not share
 * keys; a failed write, a refused body and a dry run keep nothing. The replay is marked in the
 * access log and not counted again in the metrics.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Database } from '../src/db/database.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { type Queryable, type Store, type TransactionOptions, StoreUnavailableError } from '../src/db/store.ts';
import { idempotencyKeyOf, purgeExpiredKeys, requestHash } from '../src/domain/idempotency-keys.ts';
import { buildApp } from '../src/http/app.ts';
import { LIMITS } from '../src/limits.ts';
import { databaseContents } from './support/database-contents.ts';
import { ADMIN_KEY, Harness, storeBackends } from './support/harness.ts';
import { parseExposition, valueOf } from './support/prometheus.ts';

/**
 * The harness's store with two switches a test turns. `holdNextClaim` keeps the request that
 * claims a key waiting once its claim has committed, before its batch begins: in flight, as a
 * slow write is. `failNextCompletion` makes the statement that stores an answer fail as a lost
 * connection does, after the batch's own statements ran in its transaction. `failNextRelease` makes
 * the statement that frees a failed write's key fail the same way, once. `freeKeyAfterNextConflict`
 * deletes the claim a claiming insert met, right after that insert, as the holder's release does
 * when its write failed in between.
 */
class SwitchedStore implements Store {
  private hold: { reached: () => void; released: Promise<void> } | null = null;
  private failCompletion = false;
  private failRelease = false;
  private freeAfterConflict = false;

  constructor(private readonly inner: Store) {}

  holdNextClaim(): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => { reached = resolve; });
    this.hold = { reached, released: new Promise<void>((resolve) => { release = resolve; }) };
    return { reached: reachedPromise, release };
  }

  failNextCompletion(): void {
    this.failCompletion = true;
  }

  failNextRelease(): void {
    this.failRelease = true;
  }

  freeKeyAfterNextConflict(): void {
    this.freeAfterConflict = true;
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T> {
    let claimed = false;
    const result = await this.inner.transaction((tx) => fn({
      query: <Row,>(text: string, params?: readonly (string | null)[]) => {
        if (text.includes('insert into idempotency_keys')) claimed = true;
        if (this.failCompletion && text.includes('set response_status')) {
          this.failCompletion = false;
          return Promise.reject(new StoreUnavailableError('CONNECTION_CLOSED', 'induced by the test'));
        }
        if (this.failRelease && text.includes('delete from idempotency_keys') && text.includes('claim_id')) {
          this.failRelease = false;
          return Promise.reject(new StoreUnavailableError('CONNECTION_CLOSED', 'induced by the test'));
        }
        if (this.freeAfterConflict && text.includes('insert into idempotency_keys')) {
          return tx.query<Row>(text, params).then(async (rows) => {
            if (rows.length > 0) return rows;
            this.freeAfterConflict = false;
            await tx.query('delete from idempotency_keys where university_id = $1 and token_id = $2 and key = $3', params!.slice(0, 3));
            return rows;
          });
        }
        return tx.query<Row>(text, params);
      },
      exec: (text) => tx.exec(text),
      queryColumns: (text, params) => tx.queryColumns(text, params),
    }), options);
    const hold = this.hold;
    if (claimed && hold) {
      this.hold = null;
      hold.reached();
      await hold.released;
    }
    return result;
  }

  query: Store['query'] = (text, params) => this.inner.query(text, params);
  queryInTransaction: Store['queryInTransaction'] = (text, params, options) => this.inner.queryInTransaction(text, params, options);
  readAsReader: Store['readAsReader'] = (binding, form, text, params) => this.inner.readAsReader(binding, form, text, params);
  exec: Store['exec'] = (text) => this.inner.exec(text);
  queryColumns: Store['queryColumns'] = (text, params) => this.inner.queryColumns(text, params);
  isDistributed: Store['isDistributed'] = () => this.inner.isDistributed();
  poolStats: Store['poolStats'] = () => this.inner.poolStats();
  get transactionConnections(): number {
    return this.inner.transactionConnections;
  }
  close: Store['close'] = () => this.inner.close();
}

interface Answer {
  status: number;
  headers: Record<string, unknown>;
  body: string;
  json: any;
}

const cohort = (name: string, overrides: Record<string, unknown> = {}) => ({
  name, display_name: `Cohort ${name}`, program: 'History', degree: 'BA',
  start_date: '2024-09-01', end_date: '2999-06-30', intake_year: 2024, intake_term: 'Fall', ...overrides,
});

describe('Idempotency-Key and the request it names (pure parts)', () => {
  test('a key is 1 to 255 printable ASCII characters; anything else is 400 INVALID_IDEMPOTENCY_KEY', () => {
    assert.equal(idempotencyKeyOf(undefined), null);
    for (const key of ['a', 'nightly 2026-01-01 #3', '~'.repeat(LIMITS.idempotencyKeyChars)]) assert.equal(idempotencyKeyOf(key), key);
    for (const key of ['', 'x'.repeat(LIMITS.idempotencyKeyChars + 1), 'clé', 'tab\there', 'new\nline', ['a', 'b']]) {
      assert.throws(() => idempotencyKeyOf(key), (error: { code?: string; status?: number }) => error.code === 'INVALID_IDEMPOTENCY_KEY' && error.status === 400, String(key));
    }
  });

  test('the request hash ignores key order and spacing of the body and nothing else', () => {
    const base = { method: 'PUT', resource: 'cohorts', prefer: undefined, body: { cohorts: [{ name: 'a', degree: 'BA' }] } };
    const hash = requestHash(base);
    assert.match(hash, /^[0-9a-f]{64}$/);
    assert.equal(requestHash({ ...base, body: JSON.parse('{ "cohorts" : [ { "degree":"BA", "name":"a" } ] }') }), hash);
    for (const other of [
      { ...base, method: 'POST' },
      { ...base, resource: 'students' },
      { ...base, prefer: 'tx=commit' },
      { ...base, body: { cohorts: [{ name: 'a', degree: 'BSc' }] } },
      { ...base, body: { cohorts: [{ name: 'a', degree: 'BA' }, { name: 'a', degree: 'BA' }] } },
    ]) assert.notEqual(requestHash(other), hash, JSON.stringify(other));
  });

  test('a number past a double\'s range (1e309 parses as Infinity) is not the same request as null', () => {
    const withPhone = (body: string) => requestHash({ method: 'PATCH', resource: 'students', prefer: undefined, body: JSON.parse(body) });
    const hashes = ['null', '1e309', '-1e309'].map((phone) => withPhone(`{"students":[{"email":"a@b.edu","phone":${phone}}]}`));
    assert.equal(new Set(hashes).size, 3);
  });
});

for (const backend of storeBackends()) {
  describe(`idempotency keys on ${backend}`, () => {
    let h: Harness;
    let store: SwitchedStore;
    let app: FastifyInstance;
    const logLines: string[] = [];
    let university: string;
    let writeToken: string;
    let otherToken: string;
    let otherUniversityToken: string;
    let serial = 0;
    const unique = (tag: string) => `${tag}-${++serial}-${randomUUID().slice(0, 8)}`;

    const settings = {
      adminKey: ADMIN_KEY, redisUrl: undefined, readLimitPerMin: 100_000, writeLimitPerMin: 100_000, logLevel: 'info',
      logStream: { write: (line: string) => void logLines.push(line) },
    };

    async function send(on: FastifyInstance, options: {
      key?: string; rows?: unknown[]; resource?: 'cohorts' | 'students'; method?: 'PUT' | 'POST' | 'PATCH'; token?: string; prefer?: string; payload?: string;
    }): Promise<Answer> {
      const resource = options.resource ?? 'cohorts';
      const response = await on.inject({
        method: options.method ?? 'PUT',
        url: `/v1/${resource}`,
        headers: {
          authorization: `Bearer ${options.token ?? writeToken}`,
          'content-type': 'application/json',
          ...(options.key !== undefined ? { 'idempotency-key': options.key } : {}),
          ...(options.prefer ? { prefer: options.prefer } : {}),
        },
        payload: options.payload ?? JSON.stringify({ [resource]: options.rows ?? [] }),
      });
      let json: unknown;
      try {
        json = JSON.parse(response.body);
      } catch {
        json = undefined;
      }
      return { status: response.statusCode, headers: response.headers, body: response.body, json };
    }
    const write = (options: Parameters<typeof send>[1]) => send(app, options);
    const cohortsNamed = (name: string) => h.sql<{ id: string }>('select id from cohorts where university_id = $1 and name = $2', [university, name]);
    const keyRows = (key: string) => h.sql<{ response_status: number | null }>('select response_status from idempotency_keys where key = $1', [key]);

    before(async () => {
      h = await Harness.start(backend);
      university = (await h.admin('POST', '/universities', { name: 'Eastbrook University' })).json.id;
      writeToken = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      otherToken = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      const other = (await h.admin('POST', '/universities', { name: 'Westmoor University' })).json.id;
      otherUniversityToken = (await h.admin('POST', '/tokens', { university_id: other, can_write: true })).json.token;
      store = new SwitchedStore(h.store);
      app = await buildApp(settings, new Database(store, 5_000));
      await app.ready();
    });
    after(async () => {
      await app.close();
      await h.close();
    });

    test('a repeat gets the first answer byte for byte, marked Idempotent-Replayed, and writes nothing', async () => {
      const key = randomUUID();
      const name = unique('repeat');
      const rows = [cohort(name), { name: '' }];
      const first = await write({ key, rows, prefer: 'tx=commit' });
      assert.equal(first.status, 200, first.body);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      assert.equal(first.headers['preference-applied'], 'tx=commit');
      assert.deepEqual(first.json.counts, { created: 1, updated: 0, unchanged: 0, rejected: 1 });
      const before = await databaseContents(h);
      // The same rows with other spacing and key order are the same request.
      const payload = JSON.stringify({ cohorts: rows.map((row) => Object.fromEntries(Object.entries(row).reverse())) }, null, 2);
      const repeat = await write({ key, payload, prefer: 'tx=commit' });
      assert.equal(repeat.status, first.status);
      assert.equal(repeat.body, first.body);
      assert.equal(repeat.headers['idempotent-replayed'], 'true');
      assert.equal(repeat.headers['preference-applied'], 'tx=commit');
      assert.equal(repeat.headers['content-type'], first.headers['content-type']);
      assert.deepEqual(await databaseContents(h), before, 'the repeat changed the database');
      assert.equal((await cohortsNamed(name)).length, 1);
      // Without the key the same request is a new write: PUT finds the cohort unchanged.
      const unkeyed = await write({ rows });
      assert.deepEqual(unkeyed.json.counts, { created: 0, updated: 0, unchanged: 1, rejected: 1 });
    });

    test('POST students with a key: a retry gets "created" again, not ALREADY_EXISTS', async () => {
      const name = unique('students');
      await write({ rows: [cohort(name)] });
      const key = randomUUID();
      const rows = [{ email: `${name}@eastbrook.example.edu`, first_name: 'Ada', last_name: 'Lovelace', cohort_name: name, is_alumni: false }];
      const first = await write({ key, method: 'POST', resource: 'students', rows });
      assert.equal(first.json.results[0].status, 'created');
      const before = await databaseContents(h);
      const retry = await write({ key, method: 'POST', resource: 'students', rows });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.deepEqual(retry.json, first.json);
      assert.deepEqual(await databaseContents(h), before);
      const unkeyed = await write({ method: 'POST', resource: 'students', rows });
      assert.equal(unkeyed.json.results[0].code, 'ALREADY_EXISTS', 'without the key the retry is a second create');
    });

    test("erasing a student drops the kept answers that name it: a retry runs again, and nothing serves the erased address (a replay did, for a day)", async () => {
      const name = unique('erased');
      await write({ rows: [cohort(name)] });
      const email = `${name}@eastbrook.example.edu`;
      const row = { email, first_name: 'Era', last_name: 'Sed', cohort_name: name, is_alumni: false };
      const created = await write({ key: randomUUID(), resource: 'students', rows: [row] });
      const id = created.json.results[0].id;
      // A refused row names the address as sent, not the id.
      const refusedKey = randomUUID();
      await write({ key: refusedKey, resource: 'students', rows: [{ ...row, email: `\u00a0${email.toUpperCase()}`, phone: 'none' }] });
      const otherKey = randomUUID();
      await write({ key: otherKey, resource: 'students', rows: [{ ...row, email: `other-${email}` }] });
      const createdKey = (await h.sql<{ key: string }>('select key from idempotency_keys where response_body like $1', [`%${id}%`]))[0].key;
      assert.equal((await h.admin('DELETE', `/students/${id}`)).status, 204);
      const kept = await h.sql<{ body: string }>('select response_body as body from idempotency_keys where university_id = $1', [university]);
      const named = kept.flatMap(({ body }) => (body === null ? [] : JSON.parse(body).results))
        .filter((result: { id?: string; email?: string }) => result.id === id || result.email?.trim().toLowerCase() === email);
      assert.deepEqual(named, [], 'a kept answer names the erased student');
      assert.deepEqual(await keyRows(refusedKey), []);
      assert.equal((await keyRows(otherKey)).length, 1, "another student's answer is kept");
      const retry = await write({ key: createdKey, resource: 'students', rows: [row] });
      assert.equal(retry.headers['idempotent-replayed'], undefined);
      assert.equal(retry.json.results[0].code, 'ACCOUNT_DELETED');
    });

    test('the same key with another body, method, resource or Prefer is 422 IDEMPOTENCY_KEY_REUSED, and nothing is written', async () => {
      const key = randomUUID();
      const name = unique('reused');
      assert.equal((await write({ key, rows: [cohort(name)] })).status, 200);
      const before = await databaseContents(h);
      for (const other of [
        { rows: [cohort(name, { display_name: 'Renamed' })] },
        { rows: [cohort(unique('other'))] },
        { method: 'POST' as const, rows: [cohort(name)] },
        { method: 'PATCH' as const, rows: [{ name, display_name: 'Renamed' }] },
        { resource: 'students' as const, rows: [] },
        { rows: [cohort(name)], prefer: 'handling=lenient' },
      ]) {
        const refused = await write({ key, ...other });
        assert.equal(refused.status, 422, JSON.stringify(other));
        assert.deepEqual(Object.keys(refused.json).sort(), ['code', 'details', 'hint', 'message']);
        assert.equal(refused.json.code, 'IDEMPOTENCY_KEY_REUSED');
      }
      assert.deepEqual(await databaseContents(h), before);
    });

    test('a repeat while the first runs is 409 IDEMPOTENCY_KEY_IN_USE with Retry-After; once it is done the repeat gets its answer', async () => {
      const key = randomUUID();
      const name = unique('running');
      const held = store.holdNextClaim();
      const first = write({ key, rows: [cohort(name)] });
      await held.reached;
      const repeat = await write({ key, rows: [cohort(name)] });
      assert.equal(repeat.status, 409, repeat.body);
      assert.equal(repeat.json.code, 'IDEMPOTENCY_KEY_IN_USE');
      assert.equal(repeat.headers['retry-after'], '1');
      assert.deepEqual(await cohortsNamed(name), [], 'the 409 wrote the batch');
      // A different request under a running key is still a different request.
      assert.equal((await write({ key, rows: [cohort(unique('else'))] })).status, 422);
      held.release();
      const done = await first;
      assert.equal(done.status, 200, done.body);
      assert.equal(done.json.counts.created, 1);
      const later = await write({ key, rows: [cohort(name)] });
      assert.equal(later.headers['idempotent-replayed'], 'true');
      assert.equal(later.body, done.body);
      assert.equal((await cohortsNamed(name)).length, 1);
    });

    test('a claim freed between the repeat\'s insert and its read of the key (the holder\'s write failed) leaves the key to the repeat, which runs (it was 500)', async () => {
      const key = randomUUID();
      const name = unique('freed');
      const held = store.holdNextClaim();
      const first = write({ key, rows: [cohort(name)] });
      await held.reached;
      store.freeKeyAfterNextConflict();
      const repeat = await write({ key, rows: [cohort(name)] });
      assert.equal(repeat.status, 200, repeat.body);
      assert.equal(repeat.headers['idempotent-replayed'], undefined);
      assert.equal(repeat.json.counts.created, 1);
      held.release();
      const late = await first;
      assert.equal(late.status, 409, late.body);
      assert.equal(late.json.code, 'IDEMPOTENCY_KEY_IN_USE');
      assert.equal((await cohortsNamed(name)).length, 1);
      assert.equal((await write({ key, rows: [cohort(name)] })).body, repeat.body);
    });

    test('the same keyed request sent five times at once is written once; the others wait (409) or replay', async () => {
      const key = randomUUID();
      const name = unique('burst');
      const answers = await Promise.all(Array.from({ length: 5 }, () => write({ key, rows: [cohort(name)] })));
      const processed = answers.filter((a) => a.status === 200 && a.headers['idempotent-replayed'] === undefined);
      assert.equal(processed.length, 1, JSON.stringify(answers.map((a) => [a.status, a.headers['idempotent-replayed']])));
      for (const other of answers.filter((a) => a !== processed[0])) {
        if (other.status === 409) assert.equal(other.json.code, 'IDEMPOTENCY_KEY_IN_USE');
        else assert.deepEqual([other.status, other.headers['idempotent-replayed'], other.body], [200, 'true', processed[0].body]);
      }
      assert.equal((await cohortsNamed(name)).length, 1);
    });

    test('a lease that ran out is taken over; the first write then finds its claim gone and rolls back: one write in all', async () => {
      const key = randomUUID();
      const name = unique('lease');
      const held = store.holdNextClaim();
      const first = write({ key, rows: [cohort(name)] });
      await held.reached;
      // The first request's process is taken to have died: its lease lies in the past.
      // Times computed here: Citus refuses a STABLE function of a column (timestamptz - interval) in an UPDATE.
      await h.sql('update idempotency_keys set lease_expires_at = $2::timestamptz where key = $1', [key, new Date(Date.now() - 1_000).toISOString()]);
      const taker = await write({ key, rows: [cohort(name)] });
      assert.equal(taker.status, 200, taker.body);
      assert.equal(taker.headers['idempotent-replayed'], undefined);
      assert.equal(taker.json.counts.created, 1);
      held.release();
      const late = await first;
      assert.equal(late.status, 409, late.body);
      assert.equal(late.json.code, 'IDEMPOTENCY_KEY_IN_USE');
      assert.equal((await cohortsNamed(name)).length, 1, 'both writes were kept');
      const repeat = await write({ key, rows: [cohort(name)] });
      assert.equal(repeat.body, taker.body, 'the stored answer is the taker\'s');
    });

    test('a key past its day is free again, and the purge deletes expired keys of every university', async () => {
      const key = randomUUID();
      const name = unique('expiry');
      assert.equal((await write({ key, rows: [cohort(name)] })).status, 200);
      const fresh = randomUUID();
      assert.equal((await write({ key: fresh, rows: [cohort(unique('fresh'))] })).status, 200);
      const elsewhere = randomUUID();
      assert.equal((await write({ key: elsewhere, token: otherUniversityToken, rows: [cohort(unique('elsewhere'))] })).status, 200);
      await h.sql('update idempotency_keys set created_at = $3::timestamptz where key in ($1, $2)',
        [key, elsewhere, new Date(Date.now() - (LIMITS.idempotencyKeySeconds + 1) * 1_000).toISOString()]);
      // Another request under the expired key is a new request, processed: not 422, not a replay.
      const renamed = await write({ key, rows: [cohort(name, { display_name: 'After a day' })] });
      assert.equal(renamed.status, 200, renamed.body);
      assert.equal(renamed.headers['idempotent-replayed'], undefined);
      assert.deepEqual(renamed.json.counts, { created: 0, updated: 1, unchanged: 0, rejected: 0 });
      await purgeExpiredKeys(new Database(h.store, 5_000), new Date());
      assert.deepEqual(await keyRows(elsewhere), [], 'an expired key of another university was kept');
      assert.equal((await keyRows(key)).length, 1, 'the key taken again is a day from expiry');
      assert.equal((await keyRows(fresh)).length, 1, 'a fresh key was purged');
    });

    test('keys and answers survive a restart: a new app on the same store replays', async () => {
      const key = randomUUID();
      const rows = [cohort(unique('restart'))];
      const first = await write({ key, rows });
      assert.equal(first.status, 200);
      const restartedStore = backend === 'postgres' ? openPostgresStore(h.testStore.url!, 2) : h.store;
      const restarted = await buildApp(settings, new Database(restartedStore, 5_000));
      try {
        const replay = await send(restarted, { key, rows });
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        assert.equal(replay.body, first.body);
        assert.equal((await send(restarted, { key, rows: [cohort(unique('other'))] })).status, 422);
      } finally {
        await restarted.close();
        if (restartedStore !== h.store) await restartedStore.close();
      }
    });

    test('keys are per token: another token of the university, or one of another university, uses the same key for its own request', async () => {
      const key = randomUUID();
      const mine = await write({ key, rows: [cohort(unique('mine'))] });
      assert.equal(mine.status, 200);
      for (const token of [otherToken, otherUniversityToken]) {
        const name = unique('theirs');
        const theirs = await write({ key, token, rows: [cohort(name)] });
        assert.equal(theirs.status, 200, theirs.body);
        assert.equal(theirs.headers['idempotent-replayed'], undefined);
        assert.equal(theirs.json.counts.created, 1);
        assert.notEqual(theirs.body, mine.body);
        const again = await write({ key, token, rows: [cohort(name)] });
        assert.equal(again.body, theirs.body);
        assert.equal(again.headers['idempotent-replayed'], 'true');
      }
      // The other university's key row is invisible to this university's scope.
      const [seen] = await h.db.asPartner({ universityIds: [university] }, (tx) => tx.query<{ n: number }>('select count(*)::int as n from idempotency_keys where key = $1', [key]));
      assert.equal(seen.n, 2);
      assert.equal((await keyRows(key)).length, 3);
    });

    test('a write that fails after its batch ran (503) writes nothing and frees its key: the retry is processed', async () => {
      const key = randomUUID();
      const name = unique('failed');
      store.failNextCompletion();
      const before = await databaseContents(h);
      const failed = await write({ key, rows: [cohort(name)] });
      assert.equal(failed.status, 503, failed.body);
      assert.equal(failed.json.code, 'DATABASE_UNAVAILABLE');
      assert.deepEqual(await databaseContents(h), before, 'the failed write left rows or its key');
      const retry = await write({ key, rows: [cohort(name)] });
      assert.equal(retry.status, 200, retry.body);
      assert.equal(retry.headers['idempotent-replayed'], undefined);
      assert.equal(retry.json.counts.created, 1);
      assert.deepEqual(await keyRows(key), [{ response_status: 200 }]);
    });

    test('a failed write whose key could not be freed at once (the store still failing) frees it moments later, not after the lease', async () => {
      const key = randomUUID();
      const name = unique('release');
      store.failNextCompletion();
      store.failNextRelease();
      const failed = await write({ key, rows: [cohort(name)] });
      assert.equal(failed.status, 503, failed.body);
      // The release is tried again after RELEASE_RETRY_DELAYS_MS[0]; the lease would free the key after 60 s.
      let retry = await write({ key, rows: [cohort(name)] });
      for (let i = 0; i < 40 && retry.status === 409; i++) {
        await new Promise((r) => setTimeout(r, 50));
        retry = await write({ key, rows: [cohort(name)] });
      }
      assert.equal(retry.status, 200, retry.body);
      assert.equal(retry.json.counts.created, 1);
    });

    test('a body refused whole (413, 400) and a dry run keep nothing: the key then serves another request', async () => {
      const tooMany = randomUUID();
      const refused = await write({ key: tooMany, rows: Array.from({ length: LIMITS.batchRows + 1 }, (_, i) => cohort(`big-${i}`)) });
      assert.equal(refused.status, 413);
      assert.equal((await write({ key: tooMany, payload: '{"rows": []}' })).status, 400);
      assert.deepEqual(await keyRows(tooMany), []);
      assert.equal((await write({ key: tooMany, rows: [cohort(unique('after-413'))] })).status, 200);

      const dry = randomUUID();
      const name = unique('dry');
      const before = await databaseContents(h);
      const rehearsal = await write({ key: dry, rows: [cohort(name)], prefer: 'tx=rollback' });
      assert.equal(rehearsal.status, 200);
      assert.equal(rehearsal.headers['preference-applied'], 'tx=rollback');
      assert.deepEqual(await databaseContents(h), before, 'the dry run kept its key or wrote rows');
      const again = await write({ key: dry, rows: [cohort(name)], prefer: 'tx=rollback' });
      assert.equal(again.headers['idempotent-replayed'], undefined, 'a dry run is never replayed');
      const real = await write({ key: dry, rows: [cohort(name)] });
      assert.equal(real.status, 200, 'the real write under the dry run\'s key is a first request');
      assert.equal(real.json.counts.created, 1);
      assert.equal((await write({ key: 'x'.repeat(LIMITS.idempotencyKeyChars + 1), rows: [cohort(name)], prefer: 'tx=rollback' })).status, 400,
        'a dry run\'s key is still checked');
    });

    test('a replay is marked idempotent_replay in the access log and its rows are not counted again', async () => {
      const key = randomUUID();
      const rows = [cohort(unique('logged')), cohort(unique('logged'))];
      const created = async () => valueOf(parseExposition((await app.inject({ method: 'GET', url: '/metrics' })).body), 'pds_batch_rows_total', { resource: 'cohorts', outcome: 'created' });
      const start = await created();
      logLines.length = 0;
      await write({ key, rows });
      assert.equal(await created(), start + 2);
      const [firstLine] = logLines.map((line) => JSON.parse(line)).filter((entry) => entry.route === '/v1/cohorts');
      assert.equal(firstLine.idempotent_replay, undefined);
      assert.equal(firstLine.batch.created, 2);
      logLines.length = 0;
      const replay = await write({ key, rows });
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.equal(await created(), start + 2, 'the replay was counted again');
      const [replayLine] = logLines.map((line) => JSON.parse(line)).filter((entry) => entry.route === '/v1/cohorts');
      assert.equal(replayLine.idempotent_replay, true);
      assert.equal(replayLine.status, 200);
      assert.equal(replayLine.batch, undefined);
      assert.ok(!logLines.join('').includes(key), 'the key reached the log');
    });
  });
}
