/**
 * `npm run bench`: every benchmark, on a fresh PostgreSQL database (BENCH_DATABASE_URL's server,
 * default the local one). Each reports a ratio against a baseline measured in the same run. With
 * BENCH_CITUS_URL (a Citus coordinator) the read pages and the writes also run on a fresh
 * database of that cluster with the same data, each page and each write round right after its
 * run on PostgreSQL so that both meet the same load on a shared machine, and are reported as
 * ratios Citus / PostgreSQL. With BENCH_REDIS_URL the read pages on PostgreSQL also run through a
 * second instance of the service that counts its rate limits in that Redis.
 */
import { benchDeepPages, benchLargePage } from './read-depth.ts';
import { type ReadPageResult, benchReadPages } from './read-page.ts';
import { WRITE_LABELS, type WriteTimes, benchWritesOnPglite, benchWritesOnServers } from './writes.ts';
import { type BenchDatabase, CITUS_URL, SERVER_URL, createBenchDatabase } from './support.ts';

const STUDENTS = Number(process.env.BENCH_STUDENTS ?? 100_000);

interface ServerResults {
  reads: Map<string, ReadPageResult>;
  writes: WriteTimes;
}

/** Time per request (or per batch) on Citus over the same on PostgreSQL: 1.50 is half again as slow. */
function reportCitusRatios(single: ServerResults, citus: ServerResults): void {
  const ratio = (x: number) => `×${x.toFixed(2)}`.padStart(7);
  console.log('\n  Citus / PostgreSQL: time per request through the service at 32 connections (inverse of the throughput ratio),');
  console.log('  its p50 and p99, the p50 at one connection, and the unscoped floor\'s time per request at 32 connections');
  for (const [label, onCitus] of citus.reads) {
    const onPostgres = single.reads.get(label)!;
    console.log(`  ${`GET ${label}`.padEnd(44)} ${ratio(onPostgres.api.perSecond / onCitus.api.perSecond)}   p50 ${ratio(onCitus.api.p50Ms / onPostgres.api.p50Ms)}   p99 ${ratio(onCitus.api.p99Ms / onPostgres.api.p99Ms)}   one connection p50 ${ratio(onCitus.alone.p50Ms / onPostgres.alone.p50Ms)}   floor alone ${ratio(onPostgres.unscoped.perSecond / onCitus.unscoped.perSecond)}`);
  }
  for (const kind of Object.keys(WRITE_LABELS) as (keyof WriteTimes)[]) {
    const [onCitus, onPostgres] = [citus.writes[kind], single.writes[kind]];
    console.log(`  ${WRITE_LABELS[kind].padEnd(44)} ${ratio(onCitus.service / onPostgres.service)}   (${onCitus.service.toFixed(1)} vs ${onPostgres.service.toFixed(1)} ms/batch)   its floor ${ratio(onCitus.floor / onPostgres.floor)}`);
  }
}

console.log(`Partner data service benchmarks (${STUDENTS.toLocaleString()} students, PostgreSQL${CITUS_URL ? ' and Citus' : ''})`);
const bench = await createBenchDatabase(SERVER_URL, 'BENCH_DATABASE_URL', 'pds_bench', STUDENTS);
let cluster: BenchDatabase | null = null;
try {
  if (CITUS_URL) {
    console.log(`  Citus cluster at ${new URL(CITUS_URL).host}:`);
    cluster = await createBenchDatabase(CITUS_URL, 'BENCH_CITUS_URL', 'pds_bench', STUDENTS);
  }
  const reads = await benchReadPages([
    { server: 'PostgreSQL', bench, port: 18_081, floorPort: 18_091, sharedPort: 18_092 },
    ...(cluster ? [{ server: 'Citus', bench: cluster, port: 18_084, floorPort: 18_094 }] : []),
  ]);
  await benchDeepPages(bench, 18_082);
  await benchLargePage(bench, 18_083);
  const writes = await benchWritesOnServers(new Map([['PostgreSQL', bench.url], ...(cluster ? [['Citus', cluster.url] as const] : [])]));
  if (cluster) {
    reportCitusRatios({ reads: reads.get('PostgreSQL')!, writes: writes.get('PostgreSQL')! }, { reads: reads.get('Citus')!, writes: writes.get('Citus')! });
  }
} finally {
  await bench.drop();
  await cluster?.drop();
}
await benchWritesOnPglite();
