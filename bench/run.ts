/**
 * `npm run bench`: every benchmark, on a fresh PostgreSQL database (BENCH_DATABASE_URL's server,
 * default the local one). Each reports a ratio against a baseline measured in the same run.
 */
import { benchDeepPages, benchLargePage } from './read-depth.ts';
import { benchReadPages } from './read-page.ts';
import { benchWritesOnPglite, benchWritesOnPostgres } from './writes.ts';
import { createBenchDatabase } from './support.ts';

const STUDENTS = Number(process.env.BENCH_STUDENTS ?? 100_000);

console.log(`Partner data service benchmarks (${STUDENTS.toLocaleString()} students, PostgreSQL)`);
const bench = await createBenchDatabase('pds_bench', STUDENTS);
try {
  await benchReadPages(bench, 18_081);
  await benchDeepPages(bench, 18_082);
  await benchLargePage(bench, 18_083);
  await benchWritesOnPostgres(bench.url);
} finally {
  await bench.drop();
}
await benchWritesOnPglite();
