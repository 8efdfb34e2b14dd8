/**
 * The read path against the bare driver: the same statement the service builds, run by
 * postgres.js at the same concurrency, versus the whole service over HTTP.
 */
import postgres from 'postgres';
import { parseReadRequest } from '../src/query/read-request.ts';
import { planRead } from '../src/query/plan.ts';
import { buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { type BenchDatabase, type Throughput, closedLoop, describeThroughput, httpLoad, startService } from './support.ts';

/** Whose token reads: the demo's first university, or the consortium of the first three. */
type Reader = 'university' | 'consortium';

export const READ_PAGES: readonly { label: string; reader: Reader; query: string }[] = [
  { label: 'first 100 by id, one university', reader: 'university', query: 'select=id,email,first_name,last_name&order=id&limit=100' },
  { label: 'first 100 by id, consortium', reader: 'consortium', query: 'select=id,email,first_name,last_name&order=id&limit=100' },
  { label: 'filtered, ordered 100, consortium', reader: 'consortium', query: 'select=id,email,first_name,last_name,graduation_date&last_name=in.(Smith,Kim,Patel)&is_alumni=is.false&order=last_name,first_name&limit=100' },
];

export interface ReadPageResult {
  bare: Throughput;
  api: Throughput;
  /** The service with one connection: latency without the queueing of a saturated machine. */
  alone: Throughput;
}

/** A database to read from, and the port of the service started on it. */
export interface ReadTarget {
  server: string;
  bench: BenchDatabase;
  port: number;
}

/**
 * Each page of READ_PAGES by its label, per target's server. Every page runs on each target in
 * turn before the next page, so that on a shared machine the targets meet much the same load.
 */
export async function benchReadPages(targets: readonly ReadTarget[]): Promise<Map<string, Map<string, ReadPageResult>>> {
  const started = await Promise.all(targets.map(async ({ server, bench, port }) => {
    const { consortium, universities } = bench.demo;
    // The consortium token reads its members: the data set's first three universities (src/db/demo-data.ts).
    const readers: Record<Reader, { token: string; universityIds: string[] }> = {
      university: { token: universities[0].read_token, universityIds: [universities[0].id] },
      consortium: { token: consortium.read_token, universityIds: universities.slice(0, 3).map((u) => u.id) },
    };
    return { server, readers, service: await startService(bench.url, port), driver: postgres(bench.url, { max: 10, onnotice: () => {} }) };
  }));
  const results = new Map(targets.map((t) => [t.server, new Map<string, ReadPageResult>()]));
  try {
    for (const page of READ_PAGES) {
      const plan = planRead(resourcesByName.get('students')!, parseReadRequest({ queryString: page.query, method: 'GET' }));
      for (const { server, readers, service, driver } of started) {
        const reader = readers[page.reader];
        const statement = buildPageStatement(plan, reader.universityIds, { exactCount: false, body: true });
        const bare = await closedLoop(() => driver.unsafe(statement.text, statement.params as string[], { prepare: true }));
        const request = { url: `${service.baseUrl}/v1/students?${page.query}`, headers: { authorization: `Bearer ${reader.token}` } };
        const api = await httpLoad(request);
        // Timed here rather than by autocannon, whose latencies are whole milliseconds.
        const alone = await closedLoop(async () => {
          const response = await fetch(request.url, { headers: request.headers });
          if (!response.ok) throw new Error(`${response.status} from ${request.url}`);
          await response.arrayBuffer();
        }, 1);
        console.log(`\n  GET /v1/students?${page.query}  (${page.label}, on ${server}, 32 connections)`);
        console.log(`  ${describeThroughput('bare driver, same SQL', bare)}`);
        console.log(`  ${describeThroughput('service over HTTP', api)}`);
        console.log(`  ${describeThroughput('service over HTTP, 1 connection', alone)}`);
        console.log(`  ratio service / bare driver: ${(api.perSecond / bare.perSecond).toFixed(2)}`);
        results.get(server)!.set(page.label, { bare, api, alone });
      }
    }
  } finally {
    await Promise.all(started.map(async ({ service, driver }) => {
      await driver.end();
      await service.stop();
    }));
  }
  return results;
}
