/**
 * `npm run bench:writes`: the write benchmark alone (bench/writes.ts), on a fresh database of
 * BENCH_DATABASE_URL's server, of BENCH_CITUS_URL's cluster when set, and on PGlite in memory;
 * without the 100,000 demo students the read benchmarks need, which a batch of a university of
 * its own does not read.
 */
import { migrate } from '../src/db/migrate.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS } from '../src/db/store.ts';
import { CITUS_URL, SERVER_URL, type ServerVariable, benchScratchDatabase } from './support.ts';
import { benchWritesOnPglite, benchWritesOnServers } from './writes.ts';

const servers: [label: string, url: string, variable: ServerVariable][] = [
  ['PostgreSQL', SERVER_URL, 'BENCH_DATABASE_URL'], ...(CITUS_URL ? [['Citus', CITUS_URL, 'BENCH_CITUS_URL'] as [string, string, ServerVariable]] : []),
];
const databases = await Promise.all(servers.map(async ([label, url, variable]) => {
  const database = await benchScratchDatabase(url, variable, 'pds_bench_writes');
  // A migration on a busy cluster may take longer than a request may wait.
  const store = openPostgresStore(database.url, 2, { ...DEFAULT_STORE_TIMEOUTS, storeWaitMs: 5 * 60_000 });
  try {
    await migrate(store);
  } finally {
    await store.close();
  }
  return { label, database };
}));
try {
  await benchWritesOnServers(new Map(databases.map(({ label, database }) => [label, database.url])));
} finally {
  await Promise.all(databases.map(({ database }) => database.drop()));
}
await benchWritesOnPglite();
