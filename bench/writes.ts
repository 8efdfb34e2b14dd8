/**
 * Batch writes, on PostgreSQL, Citus and PGlite: PUT of 500 new students, its replay (all
 * unchanged), and PATCH of 500 with cohort moves, each through the service over HTTP and through
 * its hand-written floor (bench/floors/student-writes.ts) over HTTP, on the same store, one batch
 * at a time from the same client (fetch), round after round in the same run. Each figure is the
 * median over the rounds, reported as a ratio against its floor.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { readConfig } from '../src/config.ts';
import { Database } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPgliteStore } from '../src/db/pglite-store.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import type { Store } from '../src/db/store.ts';
import { buildApp } from '../src/http/app.ts';
import { issueToken } from '../src/domain/tokens.ts';
import { type BenchStudent, startWriteFloors } from './floors/student-writes.ts';

const ROWS = 500;
// A single round may take twice its usual time (a collection or a checkpoint landing in it: 210
// against 73–96 ms for the same PATCH on PGlite); 15 rounds keep the medians off those.
const ROUNDS = Number(process.env.BENCH_WRITE_ROUNDS ?? 15);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The three batches, each timed through the service and through its floor. */
const KINDS = ['put', 'replay', 'patch'] as const;
type WriteKind = (typeof KINDS)[number];

export const WRITE_LABELS: Readonly<Record<WriteKind, string>> = {
  put: `PUT, ${ROWS} new students`,
  replay: 'PUT replay, all unchanged',
  patch: `PATCH, ${ROWS} cohort moves`,
};

/** The aim for each batch (README, Measured): at most this many times its floor. */
const TARGET_RATIO: Readonly<Record<WriteKind, number>> = { put: 1.25, replay: 1.25, patch: 1.5 };

/** Median milliseconds per 500-row batch of each kind, through the service and through its floor. */
export type WriteTimes = Record<WriteKind, { service: number; floor: number }>;

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const result = await fn();
  return [performance.now() - started, result];
}

async function send(url: string, method: string, headers: Record<string, string>, rows: readonly BenchStudent[]): Promise<unknown> {
  const response = await fetch(url, { method, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ students: rows }) });
  const body = await response.text();
  if (response.status !== 200) throw new Error(`${method} ${url} answered ${response.status}: ${body.slice(0, 200)}`);
  return JSON.parse(body);
}

/** The service and the floors on one store, each listening on a port of its own, ready to time rounds of batches. */
async function prepareWrites(store: Store) {
  const db = new Database(store, 60_000);
  const { universityId, token } = await db.asOperator(async (tx) => {
    const [u] = await tx.query<{ id: string }>(`insert into universities (name) values ('Bench University') returning id`);
    for (const [name, end] of [['bench-a', '2028-06-30'], ['bench-b', '2021-06-30']]) {
      await tx.query(`insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term)
        values ($1, $2, $2, 'Program', 'BSc', '2019-09-01', $3, 2019, 'Fall')`, [u.id, name, end]);
    }
    return { universityId: u.id, token: (await issueToken(tx, { universityId: u.id, canWrite: true })).token };
  });
  const app = await buildApp({ adminKey: undefined, redisUrl: undefined, readLimitPerMin: 1e9, writeLimitPerMin: 1e9, plannedCounts: true, logLevel: 'silent' }, db);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const serviceUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/students`;
  const floors = await startWriteFloors(store, universityId);
  const auth = { authorization: `Bearer ${token}` };

  const newRows = (): BenchStudent[] => {
    const tag = randomUUID().slice(0, 8);
    return Array.from({ length: ROWS }, (_, i) => ({
      email: `s${i}.${tag}@bench.example.edu`, first_name: 'Bench', last_name: `Student ${i}`, cohort_name: 'bench-a',
      is_alumni: false, external_id: `${tag}-${i}`, phone: `+4477009${String(i).padStart(5, '0')}`,
    }));
  };
  const moves = (rows: readonly BenchStudent[]) => rows.map((row) => ({ email: row.email, cohort_name: 'bench-b' }));
  const expect = (what: string, actual: number) => {
    if (actual !== ROWS) throw new Error(`${what}: ${actual} of ${ROWS} rows`);
  };
  type Counts = { counts: Record<string, number> };

  /**
   * One round: each kind of batch once through the service and once through its floor, each on
   * addresses of its own; which of the two goes first alternates from round to round, so that
   * neither always follows the other's garbage or its writes.
   */
  const round = async (index: number): Promise<WriteTimes> => {
    const rows = { service: newRows(), floor: newRows() };
    const sends: Record<WriteKind, Record<'service' | 'floor', () => Promise<number>>> = {
      put: {
        service: async () => ((await send(serviceUrl, 'PUT', auth, rows.service)) as Counts).counts.created,
        floor: async () => ((await send(`${floors.baseUrl}/put`, 'PUT', {}, rows.floor)) as { count: number }).count,
      },
      replay: {
        service: async () => ((await send(serviceUrl, 'PUT', auth, rows.service)) as Counts).counts.unchanged,
        floor: async () => ((await send(`${floors.baseUrl}/replay`, 'PUT', {}, rows.floor)) as { count: number }).count,
      },
      patch: {
        service: async () => ((await send(serviceUrl, 'PATCH', auth, moves(rows.service))) as Counts).counts.updated,
        floor: async () => ((await send(`${floors.baseUrl}/patch`, 'PATCH', {}, moves(rows.floor))) as { count: number }).count,
      },
    };
    const times = {} as WriteTimes;
    for (const kind of KINDS) {
      const order = index % 2 === 0 ? (['service', 'floor'] as const) : (['floor', 'service'] as const);
      const measured = { service: 0, floor: 0 };
      for (const via of order) {
        const [ms, rowsDone] = await timed(sends[kind][via]);
        expect(`${via} ${kind}`, rowsDone);
        measured[via] = ms;
      }
      times[kind] = measured;
    }
    return times;
  };
  return { round, close: async () => Promise.all([app.close(), floors.close()]) };
}

/**
 * The write rounds on each store (by label), alternating between the stores round by round so
 * that on a shared machine they meet much the same load; the first round of each warms up.
 */
async function benchWrites(stores: readonly { label: string; store: Store }[]): Promise<Map<string, WriteTimes>> {
  const prepared = await Promise.all(stores.map(async ({ label, store }) => ({ label, writes: await prepareWrites(store), rounds: [] as WriteTimes[] })));
  try {
    for (let round = 0; round <= ROUNDS; round++) {
      for (const target of prepared) {
        const times = await target.writes.round(round);
        if (round > 0) target.rounds.push(times);
      }
    }
  } finally {
    await Promise.all(prepared.map((p) => p.writes.close()));
  }
  const results = new Map<string, WriteTimes>();
  for (const { label, rounds } of prepared) {
    const medians = Object.fromEntries(KINDS.map((kind) => [kind, {
      service: median(rounds.map((r) => r[kind].service)), floor: median(rounds.map((r) => r[kind].floor)),
    }])) as WriteTimes;
    console.log(`\n  Student batches of ${ROWS} on ${label}, over HTTP, one at a time (median of ${ROUNDS} rounds)`);
    for (const kind of KINDS) {
      const { service, floor } = medians[kind];
      console.log(`  ${WRITE_LABELS[kind].padEnd(32)} ${service.toFixed(1).padStart(7)} ms/batch   floor ${floor.toFixed(1).padStart(7)} ms   ×${(service / floor).toFixed(2)} of the floor (target ×${TARGET_RATIO[kind]})`);
    }
    results.set(label, medians);
  }
  return results;
}

export async function benchWritesOnPglite(): Promise<void> {
  const store = await openPgliteStore({ waitMs: readConfig({}).embeddedWaitMs });
  await migrate(store);
  try {
    await benchWrites([{ label: 'PGlite (in memory)', store }]);
  } finally {
    await store.close();
  }
}

/** The write rounds on each server's database (`urls` by label: PostgreSQL, a Citus coordinator). */
export async function benchWritesOnServers(urls: ReadonlyMap<string, string>): Promise<Map<string, WriteTimes>> {
  const stores = [...urls].map(([label, url]) => ({ label, store: openPostgresStore(url, 10) }));
  try {
    return await benchWrites(stores);
  } finally {
    await Promise.all(stores.map(({ store }) => store.close()));
  }
}
