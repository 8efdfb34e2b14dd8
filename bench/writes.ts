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

export async function benchWrites(label: string, store: Store): Promise<void> {
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

  const times = { put: [] as number[], replay: [] as number[], patch: [] as number[], bare: [] as number[], bareReplay: [] as number[] };
  for (let round = 0; round <= ROUNDS; round++) {
    const tag = randomUUID().slice(0, 8);
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      email: `s${i}.${tag}@bench.example.edu`, first_name: 'Bench', last_name: `Student ${i}`, cohort_name: 'bench-a',
      is_alumni: false, external_id: `${tag}-${i}`, phone: `+4477009${String(i).padStart(5, '0')}`,
    }));
    const putMs = await timed(async () => {
      const r = await send('PUT', rows);
      if (r.counts.created !== ROWS) throw new Error(`PUT created ${r.counts.created}`);
    });
    const replayMs = await timed(async () => {
      const r = await send('PUT', rows);
      if (r.counts.unchanged !== ROWS) throw new Error(`replay left ${r.counts.unchanged} unchanged`);
    });
    const patchMs = await timed(async () => {
      const r = await send('PATCH', rows.map((row) => ({ email: row.email, cohort_name: 'bench-b' })));
      if (r.counts.updated !== ROWS) throw new Error(`PATCH updated ${r.counts.updated}`);
    });
    const bareMs = await timed(() => bare(rows));
    const bareReplayMs = await timed(() => bare(rows));
    if (round === 0) continue;
    times.put.push(putMs);
    times.replay.push(replayMs);
    times.patch.push(patchMs);
    times.bare.push(bareMs);
    times.bareReplay.push(bareReplayMs);
  }
  await app.close();
  const line = (name: string, ms: number, baseline: number) =>
    `  ${name.padEnd(40)} ${ms.toFixed(1).padStart(7)} ms/batch  ${(ROWS / ms * 1000).toFixed(0).padStart(6)} rows/s   ×${(ms / baseline).toFixed(2)} of the bare upsert`;
  const bareMs = median(times.bare);
  console.log(`\n  Student batches of ${ROWS} on ${label} (median of ${ROUNDS} rounds)`);
  console.log(line('bare INSERT … ON CONFLICT, same rows', bareMs, bareMs));
  console.log(line('PUT, 500 new students', median(times.put), bareMs));
  console.log(line('PUT replay, all unchanged', median(times.replay), bareMs));
  console.log(line('PATCH, 500 cohort moves', median(times.patch), bareMs));
}

export async function benchWritesOnPglite(): Promise<void> {
  const store = await openPgliteStore({ waitMs: readConfig({}).embeddedWaitMs });
  await migrate(store);
  try {
    await benchWrites('PGlite (in memory)', store);
  } finally {
    await store.close();
  }
}

export async function benchWritesOnPostgres(url: string): Promise<void> {
  const store = openPostgresStore(url, 10);
  try {
    await benchWrites('PostgreSQL', store);
  } finally {
    await store.close();
  }
}
