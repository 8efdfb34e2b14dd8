/**
 * The PostgreSQL store's session pool: how many sessions it opens, how long a caller waits for
 * one, that a lost session is not handed out again, and that close() refuses waiting callers.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS, type Store, StoreUnavailableError } from '../src/db/store.ts';
import { createScratchDatabase, type ScratchDatabase } from '../tools/scratch-database.ts';

const POOL_WAIT_MS = 300;
const timeouts = { ...DEFAULT_STORE_TIMEOUTS, poolWaitMs: POOL_WAIT_MS };

/** Holds one session in an open transaction; `started` settles once it is held, `release` lets it go. */
function holdSession(store: Store): { started: Promise<void>; release(): void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => { markStarted = resolve; });
  store.transaction(async (tx) => {
    await tx.query('select 1');
    markStarted();
    await held;
  }).catch(() => {});
  return { started, release };
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<number> {
  const started = Date.now();
  await assert.rejects(promise, (error: unknown) => error instanceof StoreUnavailableError && error.code === code);
  return Date.now() - started;
}

const pid = async (store: Store) => (await store.query<{ pid: number }>('select pg_backend_pid() as pid'))[0].pid;

if (process.env.TEST_DATABASE_URL) {
  describe('the postgres session pool', () => {
    let scratch: ScratchDatabase;
    let serverAdmin: postgres.Sql;

    before(async () => {
      scratch = await createScratchDatabase(process.env.TEST_DATABASE_URL!);
      serverAdmin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    });
    after(async () => {
      await serverAdmin.end();
      await scratch.drop();
    });

    test('never opens more than maxConnections sessions', async () => {
      const store = openPostgresStore(scratch.url, 2, timeouts);
      try {
        const pids = await Promise.all(Array.from({ length: 8 }, () =>
          store.query<{ pid: number }>('select pg_backend_pid() as pid, pg_sleep(0.05)').then((rows) => rows[0].pid)));
        assert.ok(new Set(pids).size <= 2, `${new Set(pids).size} sessions`);
      } finally {
        await store.close();
      }
    });

    test('a caller waits at most poolWaitMs while every session is busy, then POOL_TIMEOUT', async () => {
      const store = openPostgresStore(scratch.url, 1, timeouts);
      try {
        const holder = holdSession(store);
        await holder.started;
        const waited = await rejectsWith(store.query('select 1'), 'POOL_TIMEOUT');
        assert.ok(waited >= POOL_WAIT_MS - 20 && waited < POOL_WAIT_MS + 500, `waited ${waited} ms`);
        holder.release();
        assert.deepEqual((await store.query('select 1 as one'))[0], { one: 1 });
      } finally {
        await store.close();
      }
    });

    test('a session whose backend was terminated is not handed out again', async () => {
      const store = openPostgresStore(scratch.url, 1, timeouts);
      try {
        const first = await pid(store);
        await serverAdmin`select pg_terminate_backend(${first})`;
        // Let the session's close arrive.
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.notEqual(await pid(store), first);
      } finally {
        await store.close();
      }
    });

    test('a refused connect fails the caller at once, not after the pool wait', async () => {
      const listener = net.createServer();
      await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
      const { port } = listener.address() as AddressInfo;
      await new Promise((resolve) => listener.close(resolve));
      const url = new URL(scratch.url);
      url.port = String(port);
      const store = openPostgresStore(url.toString(), 1, { ...DEFAULT_STORE_TIMEOUTS, poolWaitMs: 5_000 });
      try {
        const started = Date.now();
        await assert.rejects(store.query('select 1'), StoreUnavailableError);
        assert.ok(Date.now() - started < 1_000, `failed after ${Date.now() - started} ms`);
      } finally {
        await store.close();
      }
    });

    test('close() refuses a waiting caller at once and every caller after it', async () => {
      const store = openPostgresStore(scratch.url, 1, { ...timeouts, poolWaitMs: 5_000 });
      const holder = holdSession(store);
      await holder.started;
      const waiting = store.query('select 1');
      const closing = store.close();
      assert.ok(await rejectsWith(waiting, 'CONNECTION_ENDED') < 200);
      holder.release();
      await closing;
      await rejectsWith(store.query('select 1'), 'CONNECTION_ENDED');
    });
  });
}
