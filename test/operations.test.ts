/**
 * Running the service: rate limits (in memory and shared through Redis), logs without secrets,
 * the statement timeout, and `npm start`'s process: demo tokens, graceful shutdown, restart.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { ADMIN_KEY, Harness, backends } from './support/harness.ts';

describe('rate limits', () => {
  let h: Harness;
  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 6, settings: { readLimitPerMin: 3, writeLimitPerMin: 2 } });
  });
  after(() => h.close());

  test('reads: the limit per source IP spans every list endpoint; 429 carries Retry-After', async () => {
    const token = h.demo!.universities[0].read_token;
    const first = await h.get('/v1/campuses', token);
    assert.equal(first.status, 200);
    assert.equal(first.headers['ratelimit-limit'], '3');
    assert.equal(first.headers['ratelimit-remaining'], '2');
    assert.ok(Number(first.headers['ratelimit-reset']) > 0);
    assert.equal((await h.get('/v1/cohorts', token)).status, 200);
    assert.equal((await h.get('/v1/campuses', h.demo!.universities[1].read_token)).status, 200);
    const limited = await h.get('/v1/students', token);
    assert.equal(limited.status, 429);
    assert.equal(limited.json.code, 'RATE_LIMITED');
    assert.ok(Number(limited.headers['retry-after']) > 0);
  });

  test('writes: the limit is per token', async () => {
    const write = (token: string) => h.request({ method: 'PUT', url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: '{"students": []}' });
    const [a, b] = [h.demo!.universities[0].write_token, h.demo!.universities[1].write_token];
    assert.equal((await write(a)).status, 200);
    assert.equal((await write(a)).status, 200);
    const limited = await write(a);
    assert.equal(limited.status, 429);
    assert.equal(limited.json.code, 'RATE_LIMITED');
    assert.equal((await write(b)).status, 200);
  });

  test('writes: a body refused whole counts too, and its answer carries the limit\'s headers', async () => {
    const token = h.demo!.universities[2].write_token;
    const write = (payload: string) => h.request({ method: 'PUT', url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload });
    const malformed = await write('{"students": [');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.headers['ratelimit-limit'], '2');
    assert.equal(malformed.headers['ratelimit-remaining'], '1');
    assert.ok(Number(malformed.headers['ratelimit-reset']) > 0);
    assert.equal((await write('{"students": []}')).headers['ratelimit-remaining'], '0');
    assert.equal((await write('{"students": [')).status, 429);
  });

  test('every answer to a partner\'s token carries the limit that counted it: a write the token may not make, an unknown resource, a method the path does not answer, a schema not exposed', async () => {
    const token = h.demo!.universities[3].read_token;
    const send = (method: string, url: string) => h.request({ method, url, remoteAddress: '10.0.5.1', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: method === 'GET' ? undefined : '{"students": []}' });
    const limitOf = (response: Awaited<ReturnType<typeof send>>) => [response.status, response.headers['ratelimit-limit'], response.headers['ratelimit-remaining'], Number(response.headers['ratelimit-reset']) > 0];
    // Writes, per token: a read token's write (403) and a method no path answers (405).
    assert.deepEqual(limitOf(await send('PUT', '/v1/students')), [403, '2', '1', true]);
    assert.deepEqual(limitOf(await send('DELETE', '/v1/students')), [405, '2', '0', true]);
    assert.equal((await send('PUT', '/v1/students')).status, 429);
    // Reads, per source IP: a name no resource has and a path below a resource's (404).
    assert.deepEqual(limitOf(await send('GET', '/v1/no_such_resource')), [404, '3', '2', true]);
    assert.deepEqual(limitOf(await send('GET', '/v1/students/1')), [404, '3', '1', true]);
    // A schema the service does not expose (406), refused before any route.
    const profile = await h.request({ method: 'GET', url: '/v1/campuses', remoteAddress: '10.0.5.1', headers: { authorization: `Bearer ${token}`, 'accept-profile': 'private' } });
    assert.deepEqual(limitOf(profile), [406, '3', '0', true]);
  });
});

describe('behind a load balancer', () => {
  const BALANCER = '10.0.0.1';
  const read = (h: Harness, from: string, forwardedFor: string) => h.request({
    method: 'GET', url: '/v1/campuses', remoteAddress: from,
    headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}`, 'x-forwarded-for': forwardedFor },
  });

  test('with PDS_TRUST_PROXY naming the balancer, the read limit counts each client it forwards', async () => {
    const h = await Harness.start('pglite', { demoStudents: 3, settings: { readLimitPerMin: 1, trustProxy: `${BALANCER},10.0.1.0/24` } });
    try {
      assert.equal((await read(h, BALANCER, '203.0.113.1')).status, 200);
      assert.equal((await read(h, BALANCER, '203.0.113.2')).status, 200);
      assert.equal((await read(h, '10.0.1.7', '203.0.113.3')).status, 200);
      assert.equal((await read(h, BALANCER, '203.0.113.1')).status, 429);
      // Anyone else's X-Forwarded-For is not believed: the peer is the source.
      assert.equal((await read(h, '198.51.100.9', '203.0.113.4')).status, 200);
      assert.equal((await read(h, '198.51.100.9', '203.0.113.5')).status, 429);
    } finally {
      await h.close();
    }
  });

  test('without it, X-Forwarded-For is ignored and the balancer is the source', async () => {
    const h = await Harness.start('pglite', { demoStudents: 3, settings: { readLimitPerMin: 1 } });
    try {
      assert.equal((await read(h, BALANCER, '203.0.113.1')).status, 200);
      assert.equal((await read(h, BALANCER, '203.0.113.2')).status, 429);
    } finally {
      await h.close();
    }
  });
});

if (process.env.TEST_REDIS_URL) {
  test('with REDIS_URL, instances share their counts', async () => {
    // A source of its own: other suites and services on the same Redis count 127.0.0.1.
    const source = `198.18.${randomInt(256)}.${randomInt(1, 255)}`;
    const settings = { readLimitPerMin: 2, redisUrl: process.env.TEST_REDIS_URL };
    const one = await Harness.start('pglite', { demoStudents: 3, settings });
    const two = await Harness.start('pglite', { demoStudents: 3, settings });
    const read = (h: Harness) => h.request({ method: 'GET', url: '/v1/campuses', remoteAddress: source, headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}` } });
    try {
      assert.equal((await read(one)).status, 200);
      assert.equal((await read(two)).status, 200);
      assert.equal((await read(one)).status, 429);
    } finally {
      await one.close();
      await two.close();
    }
  });
}

test('logs are JSON lines with a request id and never carry a token or the admin key', async () => {
  const lines: string[] = [];
  const h = await Harness.start('pglite', { demoStudents: 3, settings: { logLevel: 'info', logStream: { write: (line) => void lines.push(line) } } });
  try {
    const token = h.demo!.universities[0].write_token;
    await h.get('/v1/students?select=id', token);
    await h.get('/v1/students', 'pds_forged-token-value');
    await h.admin('POST', '/consortia', { name: 'Logged' });
    await h.request({ method: 'PUT', url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: '{"students": [' });
    const log = lines.join('');
    assert.ok(lines.length > 0);
    for (const secret of [token, 'pds_forged-token-value', ADMIN_KEY]) assert.ok(!log.includes(secret), 'a secret reached the log');
    const entries = lines.map((l) => JSON.parse(l));
    assert.equal(entries.filter((e) => e.msg === 'request completed' && typeof e.reqId === 'string').length, 4);
  } finally {
    await h.close();
  }
});

for (const backend of backends().filter((b) => b === 'postgres')) {
  test('a query over the statement timeout is cancelled with 503 QUERY_TIMEOUT', async () => {
    const h = await Harness.start(backend, { demoStudents: 200, statementTimeoutMs: 300 });
    // The read waits behind a lock on its table past the timeout; the token lookup, whose
    // transactions have the same timeout, reads another table.
    const holder = postgres(h.testStore.url!, { max: 1, onnotice: () => {} });
    const held = await holder.reserve();
    try {
      await held.unsafe('begin');
      await held.unsafe('lock table resumes in access exclusive mode');
      const res = await h.get('/v1/resumes?content=wfts(english).dashboard experiments -volunteer&select=id', h.demo!.consortium.read_token);
      assert.equal(res.status, 503);
      assert.equal(res.json.code, 'QUERY_TIMEOUT');
      assert.ok(res.headers['retry-after']);
      // Every header it carries is one the description gives its 503 (the rate limit's were not).
      const doc = (await h.get('/v1/openapi.json', null)).json;
      const documented = Object.keys(doc.components.responses[doc.paths['/resumes'].get.responses['503'].$ref.split('/').pop()].headers).map((name) => name.toLowerCase());
      const carried = ['retry-after', 'x-request-id', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].filter((name) => res.headers[name] !== undefined);
      assert.equal(carried.length, 5);
      assert.deepEqual(carried.filter((name) => !documented.includes(name)), []);
    } finally {
      held.release();
      await holder.end();
      await h.close();
    }
  });
}

test('a client that disconnects mid-stream releases the embedded store at once', { timeout: 60_000 }, async () => {
  const h = await Harness.start('pglite', { demoStudents: 8000 });
  try {
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = h.app.server.address() as AddressInfo;
    const token = h.demo!.consortium.read_token;
    await new Promise<void>((resolve, reject) => {
      const req = request({ port, path: '/v1/resumes?limit=10000', headers: { authorization: `Bearer ${token}` } }, (res) => {
        assert.equal(res.statusCode, 200);
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => {});
      req.on('close', resolve);
      req.end();
      setTimeout(() => reject(new Error('no first chunk')), 10_000);
    });
    const next = await Promise.race([
      fetch(`http://127.0.0.1:${port}/v1/campuses`, { headers: { authorization: `Bearer ${token}` } }),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the store is still held by the abandoned stream')), 5_000)),
    ]);
    assert.equal(next.status, 200);
  } finally {
    await h.close();
  }
});

test('an over-long query string is 414 URI_TOO_LONG over a real socket', async () => {
  const h = await Harness.start('pglite', { demoStudents: 3 });
  try {
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = h.app.server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/v1/students?id=in.(${'1,'.repeat(10_000)}1)`, {
      headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}` },
    });
    assert.equal(res.status, 414);
    assert.equal((await res.json()).code, 'URI_TOO_LONG');
  } finally {
    await h.close();
  }
});

describe('npm start on the embedded store', () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'pds-start-'));
  });
  after(() => rm(dataDir, { recursive: true, force: true }));

  async function start(port: number) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, PDS_DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let output = '';
    // The banner is on standard error.
    child.stderr!.on('data', (chunk) => { output += chunk; });
    child.stdout!.resume();
    for (let i = 0; i < 600 && !output.includes('curl'); i++) await new Promise((r) => setTimeout(r, 100));
    return { child, output: () => output };
  }

  const children: ReturnType<typeof spawn>[] = [];
  after(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

  test('prints how to call it, finishes in-flight requests on SIGTERM and restarts on the same data', async () => {
    const port = 18_300 + (process.pid % 500);
    const first = await start(port);
    const banner = first.output();
    assert.match(banner, new RegExp(`http://127\\.0\\.0\\.1:${port}`));
    const readToken = /read token:\s+(\S+)/.exec(banner)![1];
    assert.match(/write token:\s+(\S+)/.exec(banner)![1], /^pds_/);
    assert.match(banner, /curl -H "Authorization: Bearer pds_/);
    const inFlight = fetch(`http://127.0.0.1:${port}/v1/resumes?limit=10000`, { headers: { authorization: `Bearer ${readToken}` } });
    await new Promise((r) => setTimeout(r, 20));
    first.child.kill('SIGTERM');
    const [response, [code]] = await Promise.all([inFlight, once(first.child, 'exit')]);
    assert.equal(response.status, 200);
    assert.ok(Array.isArray(await response.json()));
    assert.equal(code, 0);

    const second = await start(port);
    const token = /read token:\s+(\S+)/.exec(second.output())![1];
    assert.notEqual(token, readToken);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    const students = await fetch(`http://127.0.0.1:${port}/v1/students?select=id`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(students.status, 200);
    assert.ok((await students.json()).length > 0);
    assert.equal((await fetch(`http://127.0.0.1:${port}/v1/students`, { headers: { authorization: `Bearer ${readToken}` } })).status, 401);
    second.child.kill('SIGINT');
    assert.deepEqual(await once(second.child, 'exit'), [0, null]);
  });
});
