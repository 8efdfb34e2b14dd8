/**
 * Shared pieces of the benchmarks: a fresh PostgreSQL database with demo data, the service as
 * its own process on it, an HTTP load at fixed concurrency (autocannon), and the bare driver
 * running the same statement at the same concurrency. Figures are printed as ratios.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { Database } from '../src/db/database.ts';
import { type DemoResult, loadDemo } from '../src/domain/demo.ts';
import { migrate } from '../src/db/migrate.ts';
import { asUnavailable } from '../src/db/postgres-sessions.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS, type Store } from '../src/db/store.ts';
import { databaseErrorToApiError } from '../src/http/sqlstates.ts';
import { type ScratchDatabase, createScratchDatabase } from '../tools/scratch-database.ts';

export const SERVER_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** A Citus coordinator: when set, the read and write benchmarks run there too, as ratios to PostgreSQL. */
export const CITUS_URL = process.env.BENCH_CITUS_URL;
const CONCURRENCY = 32;
export const DURATION_S = Number(process.env.BENCH_SECONDS ?? 8);

export interface Throughput {
  perSecond: number;
  /** NaN when no answer came. */
  p50Ms: number;
  p99Ms: number;
  count: number;
  /** How long the load ran. */
  seconds: number;
}

export interface BenchDatabase {
  url: string;
  store: Store;
  db: Database;
  demo: DemoResult;
  drop(): Promise<void>;
}

const BENCH_LOAD_WAIT_MS = 10 * 60_000;

/** The variables that name the benchmarks' servers. */
export type ServerVariable = 'BENCH_DATABASE_URL' | 'BENCH_CITUS_URL';

/**
 * A fresh database named `name` on `serverUrl` (on every node of a Citus cluster). A server that
 * cannot be reached or refuses fails with a message naming it and the variable that set it,
 * first in what Node prints; the callers' `finally` blocks still drop what they made.
 */
export async function benchScratchDatabase(serverUrl: string, variable: ServerVariable, name: string): Promise<ScratchDatabase> {
  try {
    return await createScratchDatabase(serverUrl, { name });
  } catch (error) {
    // The driver's own errors, as a request's would be answered (src/http/sqlstates.ts).
    if (databaseErrorToApiError(asUnavailable(error))?.code !== 'DATABASE_UNAVAILABLE') throw error;
    throw new Error(`The benchmarks need a PostgreSQL server: ${new URL(serverUrl).host} (${variable}) answered ${(error as Error).message}.`, { cause: error });
  }
}

/** A fresh database named `name` on `serverUrl` (on every node of a Citus cluster), migrated and loaded with `students` demo students. */
export async function createBenchDatabase(serverUrl: string, variable: ServerVariable, name: string, students: number): Promise<BenchDatabase> {
  const database = await benchScratchDatabase(serverUrl, variable, name);
  // Loading 100,000 students and vacuuming take far longer than a request may wait.
  const store = openPostgresStore(database.url, 10, { ...DEFAULT_STORE_TIMEOUTS, storeWaitMs: BENCH_LOAD_WAIT_MS });
  await migrate(store);
  const db = new Database(store, 60_000);
  const started = Date.now();
  const demo = await db.asOperator((tx) => loadDemo(tx, { students }), { storeWaitMs: BENCH_LOAD_WAIT_MS });
  await store.exec('vacuum analyze');
  console.log(`  loaded ${students.toLocaleString()} demo students in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return {
    url: database.url, store, db, demo,
    async drop() {
      await store.close();
      await database.drop();
    },
  };
}

export interface ServiceProcess {
  baseUrl: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Redis for the rate-limit counts of a service instance (the read benchmark runs one with it beside one without). */
export const REDIS_URL = process.env.BENCH_REDIS_URL;

export async function startService(databaseUrl: string, port: number, env: Readonly<Record<string, string>> = {}): Promise<ServiceProcess> {
  return startProgram('src/main.ts', port, 'Partner data service on', {
    ...env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn',
    PDS_READ_LIMIT_PER_MIN: '100000000', PDS_WRITE_LIMIT_PER_MIN: '100000000',
    // Throughput, not load shedding: 32 concurrent one-second offset pages on 10 connections
    // wait longer than the default 2 s for a connection, and the default answers those 503.
    PDS_DB_POOL_WAIT_MS: '30000',
  });
}

/** A program of this repository as a process of its own serving on `port`, once it wrote `banner` on standard error. */
export async function startProgram(script: string, port: number, banner: string, env: Record<string, string>): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // The banner comes on standard error, which is shown as before.
  let output = '';
  child.stderr!.on('data', (chunk) => {
    output += chunk;
    process.stderr.write(chunk);
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200 && !output.includes(banner); i++) await new Promise((r) => setTimeout(r, 100));
  return {
    baseUrl, child,
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

export interface HttpLoad {
  url: string;
  method?: 'GET' | 'PUT' | 'PATCH' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  seconds?: number;
}

/** The throughput of `latencies` (ms, sorted here) answered in `seconds`, with their exact p50 and p99. */
function throughputOf(latencies: number[], seconds: number): Throughput {
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  return { perSecond: latencies.length / seconds, p50Ms: at(0.5), p99Ms: at(0.99), count: latencies.length, seconds };
}

/**
 * One load. Latencies are each answer's own time (autocannon's `response` event), not its
 * summary's: autocannon keeps that histogram in whole milliseconds, so a p50 of 5.9 ms read 5
 * and a p99 of 11.8 read 11, and p99/p50 read ×2.2 for ×2.0.
 */
async function loadFor(options: HttpLoad, seconds: number): Promise<Throughput> {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    autocannon({
      url: options.url, method: options.method ?? 'GET', headers: options.headers, body: options.body,
      connections: options.connections ?? CONCURRENCY, duration: seconds,
    }, (error, done) => (error ? reject(error) : resolve(done))).on('response', (_client, _status, _bytes, responseTime) => latencies.push(responseTime));
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors from ${options.url}`);
  return throughputOf(latencies, result.duration);
}

const WARM_UP_S = 2;

export async function httpLoad(options: HttpLoad): Promise<Throughput> {
  await loadFor(options, WARM_UP_S);
  return loadFor(options, options.seconds ?? DURATION_S);
}

/** Rounds of interleaved loads: enough that a drift of the shared machine meets every load alike. */
const LOAD_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);

/**
 * The loads by name, compared in one run: each warmed up once, then LOAD_ROUNDS rounds in which
 * each runs DURATION_S / LOAD_ROUNDS seconds in turn, the order turned by one each round, so
 * that none always follows the same one. Throughput is the requests over the time of all rounds;
 * p50 and p99 are the medians of the rounds'.
 */
export async function interleavedLoads<K extends string>(loads: Readonly<Record<K, HttpLoad>>): Promise<Record<K, Throughput>> {
  const names = Object.keys(loads) as K[];
  for (const name of names) await loadFor(loads[name], WARM_UP_S);
  const rounds = new Map<K, Throughput[]>(names.map((name) => [name, []]));
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + round) % names.length];
      rounds.get(name)!.push(await loadFor(loads[name], DURATION_S / LOAD_ROUNDS));
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
  return Object.fromEntries(names.map((name) => {
    const each = rounds.get(name)!;
    const count = each.reduce((sum, t) => sum + t.count, 0);
    const seconds = each.reduce((sum, t) => sum + t.seconds, 0);
    // A round in which no answer came (a page slower under load than a round is long) has no latencies.
    const answered = each.filter((t) => t.count > 0);
    return [name, { perSecond: count / seconds, p50Ms: median(answered.map((t) => t.p50Ms)), p99Ms: median(answered.map((t) => t.p99Ms)), count, seconds }];
  })) as Record<K, Throughput>;
}

/** Runs `operation` from `concurrency` loops for `seconds`, timing each call. */
export async function closedLoop(operation: () => Promise<unknown>, concurrency = CONCURRENCY, seconds = DURATION_S): Promise<Throughput> {
  const loop = async (until: number, latencies: number[] | null) => {
    while (Date.now() < until) {
      const started = performance.now();
      await operation();
      latencies?.push(performance.now() - started);
    }
  };
  const warmUntil = Date.now() + 2_000;
  await Promise.all(Array.from({ length: concurrency }, () => loop(warmUntil, null)));
  const latencies: number[] = [];
  const started = Date.now();
  const until = started + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, () => loop(until, latencies)));
  return throughputOf(latencies, (Date.now() - started) / 1000);
}

export function describeThroughput(label: string, t: Throughput): string {
  return `${label.padEnd(44)} ${t.perSecond.toFixed(0).padStart(7)} /s   p50 ${t.p50Ms.toFixed(2).padStart(7)} ms   p99 ${t.p99Ms.toFixed(2).padStart(7)} ms`;
}
