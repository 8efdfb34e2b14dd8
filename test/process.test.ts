/**
 * `npm start` as a process: one process per embedded data folder, a start that cannot have its
 * folder or its port says so in one line, exits 1 and issues no demo token, and standard output
 * carries only JSON log lines (the banner is on standard error).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { DATA_DIR_LOCK_FILE } from '../src/db/data-dir-lock.ts';
import { CONFIG_DEFAULTS } from '../src/config.ts';
import { openPgliteStore } from '../src/db/pglite-store.ts';
import { migratedSnapshot } from './support/harness.ts';

interface Started {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
}

const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

/** The service as a process manager runs it. */
const SERVICE_COMMAND = [process.execPath, '--import', 'tsx', 'src/main.ts'];

/** `npm start`, through the npm that runs the tests when there is one. */
const NPM_START = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath, 'start'] : ['npm', 'start'];

function start(dataDir: string, port: number, env: Record<string, string> = {}, [command, ...args] = SERVICE_COMMAND): Started {
  const child = spawn(command, args, {
    env: { ...process.env, PDS_DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => { stdout += chunk; });
  child.stderr!.on('data', (chunk) => { stderr += chunk; });
  return { child, stdout: () => stdout, stderr: () => stderr };
}

async function serving(started: Started, banner = 'curl'): Promise<string> {
  for (let i = 0; i < 600 && !started.stderr().includes(banner); i++) {
    if (started.child.exitCode !== null) throw new Error(`exited: ${started.stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return /read token:\s+(\S+)/.exec(started.stderr())?.[1] ?? '';
}

/**
 * A PUT with the demo write token whose body trickles: a request in progress until the request
 * timeout (30 s). Its socket, once the service has had it for a moment.
 */
async function putInProgress(started: Started, port: number): Promise<Socket> {
  const writeToken = /write token:\s+(\S+)/.exec(started.stderr())![1];
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  socket.write(`PUT /v1/students HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${writeToken}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
  await new Promise((r) => setTimeout(r, 200));
  return socket;
}

async function refused(started: Started): Promise<string> {
  const [code] = await Promise.race([
    once(started.child, 'exit'),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the second start did not exit')), 30_000).unref()),
  ]);
  assert.equal(code, 1);
  assert.ok(!`${started.stdout()}${started.stderr()}`.includes('token'), 'a refused start printed tokens');
  const lines = started.stderr().trim().split('\n');
  assert.equal(lines.length, 1, `one line, got: ${started.stderr()}`);
  return lines[0];
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const status = async (port: number, token: string) =>
  (await fetch(`http://127.0.0.1:${port}/v1/campuses`, { headers: { authorization: `Bearer ${token}` } })).status;

describe('npm start and its data folder and port', () => {
  const folders: string[] = [];
  /** A data folder holding a migrated store, which saves each start PGlite's initdb (~4 s). */
  const folder = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-process-'));
    folders.push(dir);
    await (await openPgliteStore({ dataDir: dir, loadDataDir: await migratedSnapshot(), waitMs: CONFIG_DEFAULTS.embeddedWaitMs })).close();
    return dir;
  };
  let dataDir: string;
  let port: number;
  let first: Started;
  let firstToken: string;
  before(async () => {
    dataDir = await folder();
    port = await freePort();
    first = start(dataDir, port);
    firstToken = await serving(first);
  });
  after(async () => {
    first.child.kill('SIGTERM');
    await once(first.child, 'exit');
    await Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  test('a second process on the same data folder refuses to start and changes nothing', async () => {
    const second = start(dataDir, await freePort());
    const message = await refused(second);
    assert.match(message, new RegExp(`PDS_DATA_DIR .* is in use by process ${first.child.pid} `));
    assert.equal(JSON.parse(await readFile(join(dataDir, DATA_DIR_LOCK_FILE), 'utf8')).pid, first.child.pid);
    assert.equal(await status(port, firstToken), 200);
  });

  test('a start on a busy port says to set PORT, exits 1 and writes nothing: no token, no new data folder', async () => {
    const otherDir = await folder();
    const second = start(otherDir, port);
    assert.match(await refused(second), /Port \d+ .* in use .* set PORT/);
    assert.equal(await status(port, firstToken), 200);
    const store = await openPgliteStore({ dataDir: otherDir, waitMs: CONFIG_DEFAULTS.embeddedWaitMs });
    try {
      assert.deepEqual(await store.query('select count(*)::int as tokens from tokens'), [{ tokens: 0 }]);
    } finally {
      await store.close();
    }
    const newDir = join(await mkdtemp(join(tmpdir(), 'pds-process-')), 'data');
    folders.push(dirname(newDir));
    assert.match(await refused(start(newDir, port)), /Port \d+ .* in use .* set PORT/);
    assert.equal(existsSync(newDir), false, 'the data folder was created');
  });

  test('a setting that cannot be read, or a server that cannot be reached or refuses, is one line and exit 1, never a stack trace', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PORT: 'abc' }, /^Cannot start: PORT must be a positive integer, got "abc"\.$/],
      [{ PORT: '70000' }, /^Cannot start: PORT must be at most 65535, got "70000"\.$/],
      [{ PORT: '0x10' }, /^Cannot start: PORT must be a positive integer, got "0x10"\.$/],
      // Node's timers wait at most 2^31 - 1 ms: a longer wait fired at once, and every request failed.
      [{ PDS_DB_WAIT_MS: '99999999999' }, /^Cannot start: PDS_DB_WAIT_MS must be at most 2147483647, got "99999999999"\.$/],
      [{ PDS_STATEMENT_TIMEOUT_MS: '2147483647' }, /^Cannot start: PDS_STATEMENT_TIMEOUT_MS must be at most 2147482647/],
      // These crashed with a stack trace, after the store was migrated.
      [{ PDS_TRUST_PROXY: '10.0.0.0/33' }, /^Cannot start: PDS_TRUST_PROXY must list addresses or CIDR ranges such as 10\.0\.0\.0\/8, got "10\.0\.0\.0\/33"\.$/],
      [{ LOG_LEVEL: 'loud' }, /^Cannot start: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"\.$/],
      [{ PDS_DATA_DIR: join(fileURLToPath(import.meta.url), 'data') }, /^Cannot start: PDS_DATA_DIR .*process\.test\.ts\/data cannot be used as the data folder \(ENOTDIR\)\.$/],
      // Taken, these loaded the demo data and failed the limits open for good.
      [{ PDS_DEMO: 'maybe' }, /^Cannot start: PDS_DEMO must be "on" or "off" \(or 1 or 0\), got "maybe"\.$/],
      [{ REDIS_URL: 'http://127.0.0.1:6379' }, /^Cannot start: REDIS_URL must be a Redis URL such as redis:\/\/host:6379, got one of scheme http:\.$/],
      // This one started, revoked the demo tokens of the start before, and ended with a stack trace 2 s later.
      [{ REDIS_URL: 'redis://127.0.0.1:6379/abc' }, /^Cannot start: REDIS_URL's path must be a database number \(redis:\/\/host:6379\/2\) or nothing, got "\/abc"\.$/],
      [{ PDS_READ_LIMIT_PER_MIN: '-1' }, /^Cannot start: PDS_READ_LIMIT_PER_MIN must be a positive integer/],
      // Reported in an audit: Node's own line, `Error: getaddrinfo ENOTFOUND 999.1.1.1`, named no setting.
      [{ HOST: '999.1.1.1' }, /^Cannot listen on 999\.1\.1\.1:\d+ \(ENOTFOUND\); set PORT and HOST to an address this process may use\.$/],
      [{ DATABASE_URL: 'mysql://someone:secret@127.0.0.1/db' }, /^Cannot start: DATABASE_URL must be a PostgreSQL URL .* scheme mysql:\.$/],
      [{ DATABASE_URL: 'not a url' }, /^Cannot start: DATABASE_URL must be a PostgreSQL URL .* does not parse\.$/],
      [{ DATABASE_URL: `postgres://someone:secret@127.0.0.1:${await freePort()}/db` }, /^Cannot start: the PostgreSQL server at 127\.0\.0\.1:\d+ is unavailable \(ECONNREFUSED\); check DATABASE_URL/],
    ];
    if (process.env.TEST_REDIS_URL) {
      // Redis has 16 databases unless told otherwise: this one counted in database 0, unannounced.
      const url = new URL(process.env.TEST_REDIS_URL);
      url.pathname = '/99';
      cases.push([{ REDIS_URL: url.href }, /^Cannot start: REDIS_URL names database 99, which the Redis server refuses \(ERR DB index is out of range\)\.$/]);
    }
    if (process.env.TEST_DATABASE_URL) {
      const url = new URL(process.env.TEST_DATABASE_URL);
      url.pathname = '/pds_no_such_database';
      cases.push([{ DATABASE_URL: url.href }, /^Cannot start: the PostgreSQL server at .* refused the service: database "pds_no_such_database" does not exist \(SQLSTATE 3D000\)\.$/]);
    }
    for (const [env, expected] of cases) {
      const line = await refused(start(await folder(), await freePort(), env));
      assert.match(line, expected, JSON.stringify(env));
      assert.ok(!line.includes('secret'), 'the password never reaches the output');
    }
  });

  // Reported in an audit: the banner printed http://::1:<port>, which curl refuses.
  test('on an IPv6 address the banner\'s base URL and curl line bracket it, and the line works', async () => {
    const otherPort = await freePort();
    const started = start(await folder(), otherPort, { HOST: '::1' });
    const token = await serving(started);
    assert.match(started.stderr(), new RegExp(`Partner data service on http://\\[::1\\]:${otherPort} `));
    const curlUrl = /curl .* "(\S+)"/.exec(started.stderr())![1];
    assert.equal((await fetch(curlUrl, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    started.child.kill('SIGTERM');
    assert.deepEqual(await once(started.child, 'exit'), [0, null]);
  });

  test('standard output is JSON lines only: the banner is on standard error', async () => {
    const otherPort = await freePort();
    const started = start(await folder(), otherPort, { LOG_LEVEL: 'info' });
    const token = await serving(started);
    assert.match(started.stderr(), new RegExp(`Partner data service on http://127\\.0\\.0\\.1:${otherPort}`));
    assert.equal(await status(otherPort, token), 200);
    const email = 'stdout.private@example.edu';
    assert.equal((await fetch(`http://127.0.0.1:${otherPort}/v1/students?email=eq.${email}`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    started.child.kill('SIGTERM');
    assert.deepEqual(await once(started.child, 'exit'), [0, null]);
    const entries = started.stdout().trimEnd().split('\n').map((line) => JSON.parse(line));
    assert.deepEqual(entries.filter((e) => e.msg === 'request completed').map((e) => [e.route, e.status]), [['/v1/campuses', 200], ['/v1/students', 200]]);
    assert.ok(entries.some((e) => e.msg === 'shutting down'));
    assert.ok(!started.stdout().includes(email) && !started.stdout().includes(token), 'the log carries a query value or a token');
  });

  test('a CONNECT its client resets leaves the service running: the bare socket Node hands over has its error handled', async () => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    await once(socket, 'connect');
    socket.write('CONNECT /v1/students HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((r) => setTimeout(r, 20));
    socket.resetAndDestroy();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(first.child.exitCode, null, first.stderr());
    assert.equal(await status(port, firstToken), 200);
  });

  test('npm start passes SIGTERM on to the service, which shuts down: the sh between them left it serving, orphaned', async () => {
    const npmPort = await freePort();
    const started = start(await folder(), npmPort, { LOG_LEVEL: 'info' }, NPM_START);
    const token = await serving(started);
    assert.equal(await status(npmPort, token), 200);
    started.child.kill('SIGTERM');
    await once(started.child, 'exit');
    await new Promise((r) => setTimeout(r, 500));
    assert.match(started.stdout(), /"msg":"shutting down"/);
    await assert.rejects(fetch(`http://127.0.0.1:${npmPort}/healthz`), 'the service still answers');
  });

  test('SIGTERM waits for a request in progress only up to PDS_SHUTDOWN_TIMEOUT_MS, then closes its connection and exits', async () => {
    const dir = await folder();
    const otherPort = await freePort();
    const started = start(dir, otherPort, { PDS_SHUTDOWN_TIMEOUT_MS: '500' });
    await serving(started);
    const socket = await putInProgress(started, otherPort);
    const signalled = Date.now();
    started.child.kill('SIGTERM');
    assert.deepEqual(await once(started.child, 'exit'), [0, null]);
    const tookMs = Date.now() - signalled;
    assert.ok(tookMs < 5_000, `exited after ${tookMs} ms`);
    assert.match(started.stdout(), /requests still in progress at the shutdown limit/);
    socket.destroy();
  });

  // Reported in review: a SIGINT after a SIGTERM was ignored for the whole shutdown wait (20 s),
  // and a second SIGTERM ended the process with nothing in the log.
  test('a second signal during the shutdown, of either kind, ends the process at once and says so', async () => {
    const otherPort = await freePort();
    const started = start(await folder(), otherPort);
    await serving(started);
    const socket = await putInProgress(started, otherPort);
    started.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const signalled = Date.now();
    started.child.kill('SIGINT');
    assert.deepEqual(await once(started.child, 'exit'), [130, null]);
    const tookMs = Date.now() - signalled;
    assert.ok(tookMs < 5_000, `exited after ${tookMs} ms`);
    assert.match(started.stdout(), /a second signal during the shutdown: exiting now/);
    socket.destroy();
  });

  // Reported in review: the operator API shares the partners' port, and a key such as
  // `adminkey` was taken without a word.
  test('an operator key shorter than 32 characters is taken, and the banner asks for a longer one', async () => {
    for (const [key, warned] of [['adminkey', true], [randomBytes(32).toString('base64'), false]] as const) {
      const started = start(await folder(), await freePort(), { PDS_DEMO: '0', PDS_ADMIN_KEY: key });
      await serving(started, 'OpenAPI');
      assert.equal(started.stderr().includes(`PDS_ADMIN_KEY is ${key.length} characters: anyone reaching the port may try keys`), warned, started.stderr());
      started.child.kill('SIGTERM');
      assert.deepEqual(await once(started.child, 'exit'), [0, null]);
    }
  });

  test('a lock left by a process that is gone is taken over', async () => {
    const dir = await folder();
    const gone = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(gone, 'exit');
    await writeFile(join(dir, DATA_DIR_LOCK_FILE), JSON.stringify({ pid: gone.pid, host: hostname() }));
    const otherPort = await freePort();
    const started = start(dir, otherPort, { PDS_DEMO: '0' });
    await serving(started, 'OpenAPI');
    // Without demo data there are no tokens to print: the banner says how to get some.
    assert.match(started.stderr(), /No demo tokens printed: issue tokens with the operator API \(set PDS_ADMIN_KEY to enable it\), POST \/admin\/v1\/universities/);
    assert.equal((await fetch(`http://127.0.0.1:${otherPort}/healthz`)).status, 200);
    started.child.kill('SIGTERM');
    assert.deepEqual(await once(started.child, 'exit'), [0, null]);
    await assert.rejects(readFile(join(dir, DATA_DIR_LOCK_FILE)), { code: 'ENOENT' });
  });
});
