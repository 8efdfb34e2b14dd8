/**
 * The read path against the bare driver: the same statement the service builds, run by
 * postgres.js at the same concurrency, versus the whole service over HTTP.
 */
import postgres from 'postgres';
import { parseReadRequest } from '../src/query/read-request.ts';
import { planRead } from '../src/query/plan.ts';
import { buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { type BenchDatabase, closedLoop, describeThroughput, httpLoad, startService } from './support.ts';

export const READ_PAGES = [
  { label: 'first 100 by id', query: 'select=id,email,first_name,last_name&order=id&limit=100' },
  { label: 'filtered, ordered 100', query: 'select=id,email,first_name,last_name,graduation_date&last_name=in.(Smith,Kim,Patel)&is_alumni=is.false&order=last_name,first_name&limit=100' },
];

export async function benchReadPages(bench: BenchDatabase, port: number): Promise<void> {
  const token = bench.demo.consortium.read_token;
  const service = await startService(bench.url, port);
  const driver = postgres(bench.url, { max: 10, onnotice: () => {} });
  try {
    for (const page of READ_PAGES) {
      const plan = planRead(resourcesByName.get('students')!, parseReadRequest({ queryString: page.query, method: 'GET' }));
      // The consortium token reads its members: the data set's first three universities (src/db/demo-data.ts).
      const statement = buildPageStatement(plan, bench.demo.universities.slice(0, 3).map((u) => u.id), { exactCount: false, body: true });
      const bare = await closedLoop(() => driver.unsafe(statement.text, statement.params as string[], { prepare: true }));
      const api = await httpLoad({ url: `${service.baseUrl}/v1/students?${page.query}`, headers: { authorization: `Bearer ${token}` } });
      console.log(`\n  GET /v1/students?${page.query}  (${page.label}, 32 connections)`);
      console.log(`  ${describeThroughput('bare driver, same SQL', bare)}`);
      console.log(`  ${describeThroughput('service over HTTP', api)}`);
      console.log(`  ratio service / bare driver: ${(api.perSecond / bare.perSecond).toFixed(2)}`);
    }
  } finally {
    await driver.end();
    await service.stop();
  }
}
