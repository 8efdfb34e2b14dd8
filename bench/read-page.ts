/**
 * The cheap and filtered pages through the service over HTTP against their hand-written floors
 * (bench/read-floor.ts) serving the same statement, each loaded by the same HTTP client at the
 * same concurrency in the same run: the statement alone (no role, no scope), and the statement
 * under the same role and scope as the service's. The three loads take turns in short rounds
 * (interleavedLoads in bench/support.ts), so that a drift of the shared machine's load meets all
 * three alike: run one after the other, each 8 s, the service's ratio to the floor moved between
 * ×0.55 and ×0.79 from run to run.
 */
import { CitusReadRoutes, PLACEMENTS_SQL, type Placement, nodeUrl, placementsParams } from '../src/db/citus-read-routes.ts';
import { CITUS_PARTNER_SETTINGS, Database } from '../src/db/database.ts';
import { CITUS_NODE_PARAMETERS, nodeReaderParameters, readsOnNodeSession } from '../src/db/postgres-store.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS } from '../src/db/store.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { planRead } from '../src/query/plan.ts';
import { sentAsRows } from '../src/query/execute.ts';
import { buildPageRowsStatement, buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { type BenchDatabase, type HttpLoad, REDIS_URL, type Throughput, closedLoop, describeThroughput, interleavedLoads, startProgram, startService } from './support.ts';

/** Whose token reads: the demo's first university, or the consortium of the first three. */
type Reader = 'university' | 'consortium';

const READ_PAGES: readonly { label: string; reader: Reader; query: string }[] = [
  { label: 'first 100 by id, one university', reader: 'university', query: 'select=id,email,first_name,last_name&order=id&limit=100' },
  { label: 'first 100 by id, consortium', reader: 'consortium', query: 'select=id,email,first_name,last_name&order=id&limit=100' },
  { label: 'filtered, ordered 100, consortium', reader: 'consortium', query: 'select=id,email,first_name,last_name,graduation_date&last_name=in.(Smith,Kim,Patel)&is_alumni=is.false&order=last_name,first_name&limit=100' },
];

/** A page the floor serves: the service's statement for it, where it sends it, and how the service binds the reader's role and scope. */
export interface FloorPage {
  /** The database the service reads the page from: on Citus the node holding the reader's shards (src/db/citus-read-routes.ts). */
  readonly url: string;
  readonly text: string;
  readonly params: readonly string[];
  /**
   * The startup parameters of the service's reader sessions with the reader's scope among them:
   * on PostgreSQL (Database.partnerReader), and on Citus for one university, as its node's reader
   * sessions (nodeReaderParameters); null for a consortium on Citus, which the service reads in a
   * transaction that begins with `settings`.
   */
  readonly session: Readonly<Record<string, string>> | null;
  /** The SET LOCAL statements of the reader's transaction (src/db/database.ts). */
  readonly settings: string;
  /** Whether the statement answers one row per object, put in an array (sentAsRows in src/query/execute.ts). */
  readonly asRows: boolean;
}

export const READ_FLOOR_BANNER = 'Read floor on';

export interface ReadPageResult {
  /** The floor running the statement alone. */
  unscoped: Throughput;
  /** The floor running it under the service's role and scope. */
  scoped: Throughput;
  /** For the cheap page (the first of READ_PAGES), its bytes served from memory: the tail of the machine and the load generator alone. */
  fixed?: Throughput;
  api: Throughput;
  /** With BENCH_REDIS_URL and a `sharedPort`: a second instance of the service counting its rate limits in Redis (src/http/shared-counts.ts). */
  shared?: Throughput;
  /** The service with one connection: latency without the queueing of a saturated machine. */
  alone: Throughput;
}

/** A database to read from, and the ports of the service and of the floor started on it. */
export interface ReadTarget {
  server: string;
  bench: BenchDatabase;
  port: number;
  floorPort: number;
  /** With BENCH_REDIS_URL, the port of the service instance whose rate limits are counted in Redis. */
  sharedPort?: number;
}

const ratio = (x: number) => `×${x.toFixed(2)}`;

/**
 * Each page of READ_PAGES by its label, per target's server. Every page runs on each target in
 * turn before the next page, so that on a shared machine the targets meet much the same load.
 */
export async function benchReadPages(targets: readonly ReadTarget[]): Promise<Map<string, Map<string, ReadPageResult>>> {
  const plans = READ_PAGES.map((page) => planRead(resourcesByName.get('students')!, parseReadRequest({ queryString: page.query, method: 'GET' })));
  const started = await Promise.all(targets.map(async ({ server, bench, port, floorPort, sharedPort }) => {
    const { consortium, universities } = bench.demo;
    // The consortium token reads its members: the data set's first three universities (src/domain/demo-data.ts).
    const readers: Record<Reader, { token: string; universityIds: string[] }> = {
      university: { token: universities[0].read_token, universityIds: [universities[0].id] },
      consortium: { token: consortium.read_token, universityIds: universities.slice(0, 3).map((u) => u.id) },
    };
    // The service's own statement and reader binding, with the statement timeout it runs with by default.
    const readerOf = new Database(bench.store, DEFAULT_STATEMENT_TIMEOUT_MS);
    const routes = new CitusReadRoutes((ids) => bench.store.query<Placement>(PLACEMENTS_SQL, placementsParams(ids)));
    const floorPages: FloorPage[] = await Promise.all(READ_PAGES.map(async (page, i) => {
      const scope = readers[page.reader];
      const asRows = sentAsRows(plans[i], server === 'Citus');
      const statement = asRows ? buildPageRowsStatement(plans[i], scope.universityIds) : buildPageStatement(plans[i], scope.universityIds, { exactCount: false, body: true });
      const reader = readerOf.partnerReader(scope);
      const withScope = (parameters: Readonly<Record<string, string>>) => ({ ...parameters, [reader.scope.setting]: reader.scope.value });
      const read = { ...statement, settings: reader.transaction.settings!, asRows };
      if (server !== 'Citus') return { url: bench.url, ...read, session: withScope(reader.startupParameters) };
      const node = await routes.nodeFor(reader.scope.value, scope.universityIds);
      if (!node) return { url: bench.url, ...read, session: null };
      // One university's read on a reader session of its node (src/db/postgres-store.ts readAsReader).
      const session = readsOnNodeSession(scope.universityIds) ? withScope(nodeReaderParameters(reader.startupParameters)) : null;
      return { url: nodeUrl(bench.url, node), ...read, session };
    }));
    // The statement alone with the service's plan caching on PostgreSQL (its reader sessions'), and
    // on Citus with the executor pool its transactions set and the planning of its node sessions.
    const unscopedParameters = server === 'Citus' ? { ...CITUS_PARTNER_SETTINGS, ...CITUS_NODE_PARAMETERS } : { plan_cache_mode: readerOf.partnerReader(readers.university).startupParameters.plan_cache_mode };
    const [service, shared, floor] = await Promise.all([
      startService(bench.url, port),
      REDIS_URL && sharedPort ? startService(bench.url, sharedPort, { REDIS_URL }) : null,
      startProgram('bench/read-floor.ts', floorPort, READ_FLOOR_BANNER, { READ_FLOOR_PAGES: JSON.stringify(floorPages), READ_FLOOR_PARAMETERS: JSON.stringify(unscopedParameters) }),
    ]);
    return { server, readers, service, shared, floor };
  }));
  const results = new Map(targets.map((t) => [t.server, new Map<string, ReadPageResult>()]));
  try {
    for (const [index, page] of READ_PAGES.entries()) {
      for (const { server, readers, service, shared: sharedService, floor } of started) {
        const reader = readers[page.reader];
        const request = { url: `${service.baseUrl}/v1/students?${page.query}`, headers: { authorization: `Bearer ${reader.token}` } };
        const loads: Record<string, HttpLoad> = {
          unscoped: { url: `${floor.baseUrl}/unscoped/${index}` }, scoped: { url: `${floor.baseUrl}/scoped/${index}` }, api: request,
          ...(index === 0 ? { fixed: { url: `${floor.baseUrl}/fixed/${index}` } } : {}),
          ...(sharedService ? { shared: { ...request, url: `${sharedService.baseUrl}/v1/students?${page.query}` } } : {}),
        };
        const { unscoped, scoped, api, shared, fixed } = await interleavedLoads(loads);
        // Timed here rather than by autocannon, whose latencies are whole milliseconds.
        const alone = await closedLoop(async () => {
          const response = await fetch(request.url, { headers: request.headers });
          if (!response.ok) throw new Error(`${response.status} from ${request.url}`);
          await response.arrayBuffer();
        }, 1);
        console.log(`\n  GET /v1/students?${page.query}  (${page.label}, on ${server}, 32 connections)`);
        console.log(`  ${describeThroughput('floor: the statement alone', unscoped)}`);
        console.log(`  ${describeThroughput('floor: under the role and scope', scoped)}`);
        console.log(`  ${describeThroughput('service over HTTP', api)}`);
        if (shared) console.log(`  ${describeThroughput('service over HTTP, limits counted in Redis', shared)}`);
        if (fixed) console.log(`  ${describeThroughput('the same bytes from memory, no database', fixed)}`);
        console.log(`  ${describeThroughput('service over HTTP, 1 connection', alone)}`);
        console.log(`  service / floor alone ${ratio(api.perSecond / unscoped.perSecond)} (aim ≥ ×0.80), / floor under the role and scope ${ratio(api.perSecond / scoped.perSecond)}; service p99 / p50 ${ratio(api.p99Ms / api.p50Ms)} (aim ≤ ×2)`);
        console.log(`  p99 / p50 of the floors: alone ${ratio(unscoped.p99Ms / unscoped.p50Ms)}, under the role and scope ${ratio(scoped.p99Ms / scoped.p50Ms)}${fixed ? `, the bytes from memory ${ratio(fixed.p99Ms / fixed.p50Ms)}` : ''}`);
        if (shared) console.log(`  with limits counted in Redis: / floor alone ${ratio(shared.perSecond / unscoped.perSecond)}, / the service counting in memory ${ratio(shared.perSecond / api.perSecond)}`);
        results.get(server)!.set(page.label, { unscoped, scoped, api, alone, ...(shared ? { shared } : {}), ...(fixed ? { fixed } : {}) });
      }
    }
  } finally {
    await Promise.all(started.map(async ({ service, shared, floor }) => {
      await floor.stop();
      await shared?.stop();
      await service.stop();
    }));
  }
  return results;
}
