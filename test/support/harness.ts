/**
 * Test harness: a migrated store on each backend plus the app on top of it. PGlite starts from
 * a migrated snapshot cached under node_modules/.cache (initdb costs ~4 s, loading ~1 s); each
 * PostgreSQL harness gets a database of its own on TEST_DATABASE_URL's server, and each Citus
 * harness a database of its own on every node of TEST_CITUS_URL's cluster (tools/scratch-database.ts),
 * its tenant tables over 4 shards (TEST_SHARD_COUNT).
 */
import { createHash } from 'node:crypto';
import type { OutgoingHttpHeaders } from 'node:http';
import { mkdir, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { readConfig } from '../../src/config.ts';
import { Database } from '../../src/db/database.ts';
import { type DemoResult, loadDemo } from '../../src/domain/demo.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openPgliteStore } from '../../src/db/pglite-store.ts';
import { openPostgresStore } from '../../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS, type Store } from '../../src/db/store.ts';
import { type AppSettings, buildApp } from '../../src/http/app.ts';
import { createScratchDatabase } from '../../tools/scratch-database.ts';

export type Backend = 'pglite' | 'postgres' | 'citus';

export const ADMIN_KEY = 'test-admin-key';

/** The service's default wait for the embedded store's session (PDS_EMBEDDED_WAIT_MS). */
const EMBEDDED_WAIT_MS = readConfig({}).embeddedWaitMs;

/** The server URL each server backend's scratch databases are made on. */
const SERVER_URLS: Readonly<Record<Exclude<Backend, 'pglite'>, string | undefined>> = {
  postgres: process.env.TEST_DATABASE_URL,
  citus: process.env.TEST_CITUS_URL,
};

/**
 * The shards of each tenant table in a Citus harness: two on each of the test cluster's workers.
 * Distributing 18 tables takes one step per shard on one connection per node: 4.0 s at 4 shards
 * against 10.5 s at the cluster's 32, most of a Citus harness's start (12–13.6 s at 32, 5.6–6.8 s at 4).
 */
const TEST_SHARD_COUNT = 4;

/** PGlite always; PostgreSQL when TEST_DATABASE_URL is set. */
export function backends(): Backend[] {
  return process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
}

/**
 * backends(), and Citus when TEST_CITUS_URL is set: for the suites whose behaviour depends on
 * the store (reads, writes, concurrency, the operator API, the alumni rules, postgrest-js). A
 * Citus harness costs seconds (a database on every node, the tables distributed), so the suites
 * of the HTTP edge, documents and limits, which the store does not change, stay off it.
 */
export function storeBackends(): Backend[] {
  return [...backends(), ...(SERVER_URLS.citus ? ['citus' as const] : [])];
}

const migrationsDir = fileURLToPath(new URL('../../src/db/migrations/', import.meta.url));
const cacheDir = fileURLToPath(new URL('../../node_modules/.cache/pds-test/', import.meta.url));

export async function migratedSnapshot(): Promise<Blob> {
  const files = (await readdir(migrationsDir)).sort();
  const hash = createHash('sha256');
  for (const f of files) hash.update(f).update(await readFile(migrationsDir + f));
  const path = `${cacheDir}pglite-${hash.digest('hex').slice(0, 16)}.tar.gz`;
  try {
    return new Blob([await readFile(path)]);
  } catch {
    const store = await openPgliteStore({ waitMs: EMBEDDED_WAIT_MS });
    await migrate(store);
    const dump = await store.dump();
    await store.close();
    await mkdir(cacheDir, { recursive: true });
    const partial = `${path}.${process.pid}.tmp`;
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
    await rename(partial, path);
    return dump;
  }
}

export interface TestStore {
  store: Store;
  /** For PostgreSQL: the URL of this store's own database. */
  url?: string;
  drop(): Promise<void>;
}

/**
 * `migrated: false` leaves a server store empty; `migratedThrough` (a migration file name) leaves
 * any store as migrations up to that file made it, for tests of a database migrating forward.
 */
export async function openTestStore(backend: Backend, options: { migrated?: boolean; migratedThrough?: string; embeddedWaitMs?: number; storeWaitMs?: number } = {}): Promise<TestStore> {
  const through = options.migratedThrough;
  if (backend === 'pglite' && through !== undefined) {
    const store = await openPgliteStore({ waitMs: options.embeddedWaitMs ?? EMBEDDED_WAIT_MS });
    await migrate(store, { through });
    return { store, drop: () => store.close() };
  }
  if (backend === 'pglite') {
    const store = await openPgliteStore({ loadDataDir: await migratedSnapshot(), waitMs: options.embeddedWaitMs ?? EMBEDDED_WAIT_MS });
    return { store, drop: () => store.close() };
  }
  const database = await createScratchDatabase(SERVER_URLS[backend]!, { shardCount: TEST_SHARD_COUNT });
  const store = openPostgresStore(database.url, 10, { ...DEFAULT_STORE_TIMEOUTS, ...(options.storeWaitMs ? { storeWaitMs: options.storeWaitMs } : {}) });
  if (options.migrated !== false) await migrate(store, { through });
  return {
    store,
    url: database.url,
    async drop() {
      await store.close();
      await database.drop();
    },
  };
}

/** The statement time and store wait of a harness's demo data load. */
const DEMO_LOAD_WAIT_MS = 120_000;

export interface Response {
  status: number;
  headers: OutgoingHttpHeaders;
  body: string;
  json: any;
}

export interface HarnessOptions {
  demoStudents?: number;
  settings?: Partial<AppSettings>;
  statementTimeoutMs?: number;
}

export class Harness {
  private constructor(readonly backend: Backend, readonly testStore: TestStore, readonly db: Database, readonly app: FastifyInstance, readonly demo: DemoResult | null) {}

  static async start(backend: Backend, options: HarnessOptions & { embeddedWaitMs?: number; storeWaitMs?: number } = {}): Promise<Harness> {
    return Harness.over(backend, await openTestStore(backend, { embeddedWaitMs: options.embeddedWaitMs, storeWaitMs: options.storeWaitMs }), options);
  }

  /** The app over a store opened already (openTestStore), migrated by then. */
  static async over(backend: Backend, testStore: TestStore, options: HarnessOptions = {}): Promise<Harness> {
    const db = new Database(testStore.store, options.statementTimeoutMs ?? 5_000);
    try {
      // Thousands of students, loaded beside other suites, take longer than a request may wait.
      const loading = new Database(testStore.store, DEMO_LOAD_WAIT_MS);
      const demo = options.demoStudents
        ? await loading.asOperator((tx) => loadDemo(tx, { students: options.demoStudents }), { storeWaitMs: DEMO_LOAD_WAIT_MS })
        : null;
      const app = await buildApp({
        // Planned counts on (PDS_PLANNED_COUNTS), the path the count tests read; off, they are exact counts.
        adminKey: ADMIN_KEY, redisUrl: undefined, readLimitPerMin: 100_000, writeLimitPerMin: 100_000, plannedCounts: true, logLevel: 'silent',
        ...options.settings,
      }, db);
      await app.ready();
      return new Harness(backend, testStore, db, app, demo);
    } catch (error) {
      // The store's open sessions would keep the test process alive after the suite failed.
      await testStore.drop();
      throw error;
    }
  }

  get store(): Store {
    return this.testStore.store;
  }

  async request(options: InjectOptions): Promise<Response> {
    const response = await this.app.inject(options);
    let json: unknown;
    try {
      json = response.body === '' ? undefined : JSON.parse(response.body);
    } catch {
      json = undefined;
    }
    return { status: response.statusCode, headers: response.headers, body: response.body, json };
  }

  get(url: string, token: string | null, headers: Record<string, string> = {}): Promise<Response> {
    return this.request({ method: 'GET', url, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } });
  }

  admin(method: InjectOptions['method'], url: string, payload?: unknown): Promise<Response> {
    return this.request({ method, url: `/admin/v1${url}`, headers: { authorization: `Bearer ${ADMIN_KEY}` }, payload: payload as InjectOptions['payload'] });
  }

  /** Ground truth: a query run as the operator, outside the API. */
  sql<T = Record<string, unknown>>(text: string, params: (string | null)[] = []): Promise<T[]> {
    return this.db.asOperator(async (tx) => [...await tx.query<T>(text, params)]);
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.testStore.drop();
  }
}
