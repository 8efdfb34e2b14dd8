/**
 * Batch writes, on PostgreSQL and on PGlite: PUT of 500 new students, its replay (all
 * unchanged), and PATCH of 500 with cohort moves, through the service (in-process, without
 * sockets), against a bare `INSERT … ON CONFLICT` of the same 500 rows in the same run.
 */
import { randomUUID } from 'node:crypto';
import { readConfig } from '../src/config.ts';
import { arrayLiteral } from '../src/db/array-literal.ts';
import { Database } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPgliteStore } from '../src/db/pglite-store.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import type { Store } from '../src/db/store.ts';
import { buildApp } from '../src/http/app.ts';
import { issueToken } from '../src/domain/tokens.ts';

const ROWS = 500;
const ROUNDS = Number(process.env.BENCH_WRITE_ROUNDS ?? 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/** Median milliseconds per 500-row batch of each kind. */
export interface WriteTimes {
  bare: number;
  put: number;
  replay: number;
  patch: number;
}

export const WRITE_LABELS: Readonly<Record<keyof WriteTimes, string>> = {
  bare: 'bare INSERT … ON CONFLICT, same rows',
  put: `PUT, ${ROWS} new students`,
  replay: 'PUT replay, all unchanged',
  patch: `PATCH, ${ROWS} cohort moves`,
};

/** The service and a bare upsert table on one store, ready to time rounds of batches. */
async function prepareWrites(store: Store) {
  const db = new Database(store, 60_000);
  const { token } = await db.asOperator(async (tx) => {
    const [u] = await tx.query<{ id: string }>(`insert into universities (name) values ('Bench University') returning id`);
    for (const [name, end] of [['bench-a', '2028-06-30'], ['bench-b', '2021-06-30']]) {
      await tx.query(`insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term)
        values ($1, $2, $2, 'Program', 'BSc', '2019-09-01', $3, 2019, 'Fall')`, [u.id, name, end]);
    }
    return { token: (await issueToken(tx, { universityId: u.id, canWrite: true })).token };
  });
  await store.exec(`create table if not exists bare_students (email text primary key, first_name text, last_name text,
    cohort_name text, is_alumni boolean, external_id text, phone text)`);
  const app = await buildApp({ adminKey: undefined, redisUrl: undefined, readLimitPerMin: 1e9, writeLimitPerMin: 1e9, plannedCounts: true, logLevel: 'silent' }, db);
  const send = async (method: 'PUT' | 'PATCH', rows: object[]) => {
    const res = await app.inject({ method, url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify({ students: rows }) });
    if (res.statusCode !== 200) throw new Error(`${method} answered ${res.statusCode}: ${res.body.slice(0, 200)}`);
    return res.json();
  };
  const bare = (rows: Record<string, string | boolean>[]) => store.query(
    `insert into bare_students (email, first_name, last_name, cohort_name, is_alumni, external_id, phone)
     select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[], $7::text[])
     on conflict (email) do update set first_name = excluded.first_name, last_name = excluded.last_name,
       cohort_name = excluded.cohort_name, is_alumni = excluded.is_alumni, external_id = excluded.external_id, phone = excluded.phone`,
    ['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni', 'external_id', 'phone'].map((k) => arrayLiteral(rows.map((r) => String(r[k])))));

  /** One round: each kind of batch once, on new addresses. */
  const round = async (): Promise<WriteTimes> => {
    const tag = randomUUID().slice(0, 8);
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      email: `s${i}.${tag}@bench.example.edu`, first_name: 'Bench', last_name: `Student ${i}`, cohort_name: 'bench-a',
      is_alumni: false, external_id: `${tag}-${i}`, phone: `+4477009${String(i).padStart(5, '0')}`,
    }));
    const put = await timed(async () => {
      const r = await send('PUT', rows);
      if (r.counts.created !== ROWS) throw new Error(`PUT created ${r.counts.created}`);
    });
    const replay = await timed(async () => {
      const r = await send('PUT', rows);
      if (r.counts.unchanged !== ROWS) throw new Error(`replay left ${r.counts.unchanged} unchanged`);
    });
    const patch = await timed(async () => {
      const r = await send('PATCH', rows.map((row) => ({ email: row.email, cohort_name: 'bench-b' })));
      if (r.counts.updated !== ROWS) throw new Error(`PATCH updated ${r.counts.updated}`);
    });
    return { bare: await timed(() => bare(rows)), put, replay, patch };
  };
  return { round, close: () => app.close() };
}

/**
 * The write rounds on each store (by label), alternating between the stores round by round so
 * that on a shared machine they meet much the same load; the first round of each warms up.
 */
export async function benchWrites(stores: readonly { label: string; store: Store }[]): Promise<Map<string, WriteTimes>> {
  const prepared = await Promise.all(stores.map(async ({ label, store }) => ({ label, writes: await prepareWrites(store), rounds: [] as WriteTimes[] })));
  try {
    for (let round = 0; round <= ROUNDS; round++) {
      for (const target of prepared) {
        const times = await target.writes.round();
        if (round > 0) target.rounds.push(times);
      }
    }
  } finally {
    await Promise.all(prepared.map((p) => p.writes.close()));
  }
  const kinds = Object.keys(WRITE_LABELS) as (keyof WriteTimes)[];
  const line = (name: string, ms: number, baseline: number) =>
    `  ${name.padEnd(40)} ${ms.toFixed(1).padStart(7)} ms/batch  ${(ROWS / ms * 1000).toFixed(0).padStart(6)} rows/s   ×${(ms / baseline).toFixed(2)} of the bare upsert`;
  const results = new Map<string, WriteTimes>();
  for (const { label, rounds } of prepared) {
    const medians = Object.fromEntries(kinds.map((kind) => [kind, median(rounds.map((r) => r[kind]))])) as unknown as WriteTimes;
    console.log(`\n  Student batches of ${ROWS} on ${label} (median of ${ROUNDS} rounds)`);
    for (const kind of kinds) console.log(line(WRITE_LABELS[kind], medians[kind], medians.bare));
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
