/**
 * Deep pages: keyset (`id=gt.<last>`) and offset pages at depth 90,000 against the first page;
 * and a 10,000-row résumé page (large `content`): time, and how far it raises the peak memory
 * (VmHWM) of a service process that has served nothing larger before.
 */
import { readFile } from 'node:fs/promises';
import postgres from 'postgres';
import { type BenchDatabase, DURATION_S, describeThroughput, httpLoad, startService } from './support.ts';

async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

export async function benchDeepPages(bench: BenchDatabase, port: number): Promise<void> {
  const service = await startService(bench.url, port);
  const headers = { authorization: `Bearer ${bench.demo.consortium.read_token}` };
  const driver = postgres(bench.url, { max: 1, onnotice: () => {} });
  try {
    const depth = Math.min(90_000, Math.floor(bench.demo.students * 0.9));
    const [{ id }] = await driver.unsafe(`select id::text from students where university_id = any($1::uuid[]) order by id offset $2 limit 1`,
      [`{${bench.demo.universities.slice(0, 3).map((u) => u.id).join(',')}}`, String(depth - 1)]);
    const pages = [
      ['first page', 'select=id,email&order=id&limit=100'],
      [`keyset page at depth ${depth.toLocaleString()}`, `select=id,email&order=id&limit=100&id=gt.${id}`],
      [`offset page at depth ${depth.toLocaleString()}`, `select=id,email&order=id&limit=100&offset=${depth}`],
    ] as const;
    console.log('\n  Deep pages of students (consortium token, 32 connections)');
    const results = [];
    for (const [label, query] of pages) {
      const t = await httpLoad({ url: `${service.baseUrl}/v1/students?${query}`, headers, seconds: Math.min(DURATION_S, 5) });
      results.push(t);
      console.log(`  ${describeThroughput(label, t)}   ×${(t.perSecond / results[0].perSecond).toFixed(2)} of the first page`);
    }

  } finally {
    await driver.end();
    await service.stop();
  }
}

export async function benchLargePage(bench: BenchDatabase, port: number): Promise<void> {
  const service = await startService(bench.url, port);
  const headers = { authorization: `Bearer ${bench.demo.consortium.read_token}` };
  const driver = postgres(bench.url, { max: 1, onnotice: () => {} });
  try {
    console.log('\n  10,000 résumés with content, one request at a time, on a fresh service process');
    const url = `${service.baseUrl}/v1/resumes?limit=10000&order=id`;
    for (let i = 0; i < 20; i++) await fetch(`${service.baseUrl}/v1/resumes?limit=10&order=id`, { headers }).then((r) => r.arrayBuffer());
    const before = await peakRssMb(service.child.pid!);
    const timings: number[] = [];
    let bytes = 0;
    let afterFirst = 0;
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const body = await fetch(url, { headers }).then((r) => r.arrayBuffer());
      timings.push(performance.now() - started);
      bytes = body.byteLength;
      if (i === 0) afterFirst = await peakRssMb(service.child.pid!);
    }
    const afterAll = await peakRssMb(service.child.pid!);
    timings.sort((a, b) => a - b);
    const bare = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      await driver.unsafe(`select coalesce(json_agg(r), '[]')::text as body from (select * from resumes order by id limit 10000) r`);
      bare.push(performance.now() - started);
    }
    bare.sort((a, b) => a - b);
    console.log(`  body ${(bytes / 1024 / 1024).toFixed(1)} MB; median ${timings[2].toFixed(0)} ms over HTTP, ${bare[2].toFixed(0)} ms for the bare driver's json_agg of the same rows (×${(bare[2] / timings[2]).toFixed(2)})`);
    console.log(`  service peak RSS ${before.toFixed(0)} MB before, ${afterFirst.toFixed(0)} MB after the first page: raised by ${(afterFirst - before).toFixed(1)} MB (budget 64 MB); ${afterAll.toFixed(0)} MB after five in a row (garbage the collector had not yet reclaimed)`);
  } finally {
    await driver.end();
    await service.stop();
  }
}
