/**
 * The service survives the store's faults: connections killed under load, a port that closes or
 * stalls, a database that refuses connections. Every request is answered, 2xx or 503 with
 * Retry-After, within the documented bound, and the service recovers by itself. Errors the
 * request's text caused are 4xx; /healthz never touches the store, /readyz reports it.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import postgres from 'postgres';
import { Database } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { type DatabaseError, type Store, StoreUnavailableError, type StoreTimeouts } from '../src/db/store.ts';
import { buildApp } from '../src/http/app.ts';
import { databaseErrorToApiError } from '../src/http/sqlstates.ts';
import { createScratchDatabase, type ScratchDatabase } from '../tools/scratch-database.ts';
import { eventually } from './support/eventually.ts';
import { ADMIN_KEY, backends, Harness, openTestStore } from './support/harness.ts';

/** node:fs/promises as CommonJS sees it: replacing a function there reaches ES imports once synced. */
const require = createRequire(import.meta.url);

function sqlError(code: string): DatabaseError {
  return Object.assign(new Error(`error ${code}`), { code });
}

describe('SQLSTATE answers', () => {
  test('every store-unavailable class answers 503 DATABASE_UNAVAILABLE with Retry-After', () => {
    for (const code of ['08006', '08001', '28P01', '28000', '3D000', '53300', '53100', '55000', '57P01', '57P03', '58030', '25006']) {
      const answer = databaseErrorToApiError(sqlError(code));
      assert.equal(answer?.status, 503, code);
      assert.equal(answer?.code, 'DATABASE_UNAVAILABLE', code);
      assert.equal(answer?.headers['retry-after'], '1', code);
    }
    const dropped = databaseErrorToApiError(new StoreUnavailableError('STORE_TIMEOUT', 'no answer'));
    assert.equal(dropped?.status, 503);
    assert.equal(dropped?.headers['retry-after'], '1');
  });

  test('class 42 is the request\'s fault (400), except 42883 (404) and 42501 (the service\'s, 500)', () => {
    assert.equal(databaseErrorToApiError(sqlError('42601'))?.status, 400);
    assert.equal(databaseErrorToApiError(sqlError('42P10'))?.status, 400);
    assert.equal(databaseErrorToApiError(sqlError('42883'))?.status, 404);
    assert.equal(databaseErrorToApiError(sqlError('42501')), null);
  });

  test('timeouts, races, constraints and data exceptions keep their answers', () => {
    assert.deepEqual([databaseErrorToApiError(sqlError('57014'))?.status, databaseErrorToApiError(sqlError('57014'))?.code], [503, 'QUERY_TIMEOUT']);
    assert.equal(databaseErrorToApiError(sqlError('40001'))?.code, 'CONCURRENT_WRITE');
    assert.equal(databaseErrorToApiError(sqlError('40P01'))?.code, 'CONCURRENT_WRITE');
    assert.deepEqual([databaseErrorToApiError(sqlError('23505'))?.status, databaseErrorToApiError(sqlError('23505'))?.code], [409, 'CONFLICT']);
    assert.equal(databaseErrorToApiError(sqlError('22P02'))?.status, 400);
    assert.equal(databaseErrorToApiError(sqlError('XX000')), null);
  });

  test('a violated constraint names its field, from the driver\'s fields or, as Citus passes a worker\'s error on, from the shard\'s constraint in the message', () => {
    const body = { university_id: 'u-1', name: 'Main', short_name: 'MU' };
    const driver = Object.assign(sqlError('23503'), { table_name: 'campuses', constraint_name: 'campuses_university_id_fkey' });
    assert.equal(databaseErrorToApiError(driver, body)?.message, 'university_id u-1 does not exist.');
    const citusReference = Object.assign(new Error('insert or update on table "campuses_102035" violates foreign key constraint "campuses_university_id_fkey_102035"'), { code: '23503' });
    assert.equal(databaseErrorToApiError(citusReference, body)?.message, 'university_id u-1 does not exist.');
    const citusDuplicate = Object.assign(new Error('duplicate key value violates unique constraint "universities_short_name_key_102008"'), { code: '23505' });
    assert.equal(databaseErrorToApiError(citusDuplicate, body)?.message, 'A record with short_name "MU" already exists.');
    assert.equal(databaseErrorToApiError(sqlError('23505'), body)?.message, 'A record with the same key already exists.');
  });
});

for (const backend of backends()) {
  describe(`request-caused errors and health on ${backend}`, () => {
    let h: Harness;
    before(async () => {
      h = await Harness.start(backend, { demoStudents: 5 });
    });
    after(() => h.close());

    test('fts values that are not tsquery syntax answer 400 with the documented body', async () => {
      for (const value of ['fts.rop%20Ame', 'fts.a%26', 'fts.!']) {
        const res = await h.get(`/v1/universities?timezone=${value}`, h.demo!.consortium.read_token);
        assert.equal(res.status, 400, value);
        assert.deepEqual(Object.keys(res.json).sort(), ['code', 'details', 'hint', 'message']);
        assert.equal(res.json.code, '42601');
      }
    });

    test('/healthz and /readyz answer without a token', async () => {
      assert.deepEqual((await h.get('/healthz', null)).json, { status: 'ok' });
      const ready = await h.get('/readyz', null);
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.json, { status: 'ready' });
    });

    // Reported in review: /readyz read the migrations folder at every probe, so a newer
    // release's file copied over a running install made the instance, still running the old
    // code, report 503 NOT_READY until it was restarted.
    test('/readyz compares the store with the migrations the process started with, not with files added since', async () => {
      assert.equal((await h.get('/readyz', null)).status, 200);
      const fsPromises = require('node:fs/promises') as { readdir: (...args: unknown[]) => Promise<string[]> };
      const { readdir } = fsPromises;
      fsPromises.readdir = async (...args) => [...await readdir(...args), '999_from_a_newer_release.sql'];
      syncBuiltinESMExports();
      try {
        const ready = await h.get('/readyz', null);
        assert.deepEqual([ready.status, ready.json], [200, { status: 'ready' }]);
      } finally {
        fsPromises.readdir = readdir;
        syncBuiltinESMExports();
      }
    });
  });
}

/** A TCP proxy in front of PostgreSQL that can pass traffic, refuse it, or black-hole it. */
class FaultyPort {
  private mode: 'pass' | 'closed' | 'stalled' = 'pass';
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private readonly server = net.createServer((client) => this.accept(client));

  constructor(private readonly target: { host: string; port: number }) {}

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  /** Every connection is reset, and new ones are reset on arrival. */
  close(): void {
    this.mode = 'closed';
    this.dropAll();
  }

  /** Bytes stop flowing both ways; connections stay open. */
  stall(): void {
    this.mode = 'stalled';
  }

  resume(): void {
    this.mode = 'pass';
    // A real stall would deliver the held bytes late; these connections are unusable either way.
    this.dropAll();
  }

  async end(): Promise<void> {
    this.dropAll();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private dropAll(): void {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  private accept(client: net.Socket): void {
    if (this.mode === 'closed') {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.target);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    this.pairs.add(pair);
    const drop = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (bytes) => this.mode === 'pass' && upstream.write(bytes));
    upstream.on('data', (bytes) => this.mode === 'pass' && client.write(bytes));
  }
}

/** PostgreSQL's SSLRequest code: a client asks for TLS with it before its startup message. */
const SSL_REQUEST_CODE = 80877103;

/**
 * TLS terminated in front of a plain PostgreSQL server, as a managed one offers it: the SSLRequest
 * is answered `S`, and what the TLS session carries is passed on as it is.
 */
class TlsTerminator {
  private readonly server: net.Server;
  private readonly clients = new Set<net.Socket>();

  constructor(target: { host: string; port: number }, credentials: { key: string; cert: string }) {
    this.server = net.createServer((client) => {
      this.clients.add(client);
      client.on('error', () => client.destroy()).on('close', () => this.clients.delete(client));
      client.once('data', (request) => {
        if (request.length !== 8 || request.readInt32BE(4) !== SSL_REQUEST_CODE) {
          client.destroy();
          return;
        }
        client.write('S');
        const secure = new tls.TLSSocket(client, { isServer: true, ...credentials });
        const upstream = net.connect(target);
        const drop = () => {
          secure.destroy();
          upstream.destroy();
        };
        secure.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        secure.pipe(upstream).pipe(secure);
      });
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  async end(): Promise<void> {
    for (const client of this.clients) client.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** A self-signed key and certificate for localhost, made with openssl for the run. */
async function selfSignedCredentials(): Promise<{ key: string; cert: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'pds-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      '-days', '1', '-subj', '/CN=localhost'], { stdio: 'ignore' });
    return { key: await readFile(join(dir, 'key.pem'), 'utf8'), cert: await readFile(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Short timeouts so the tests run fast; the bound on an answer follows from them. */
const FAST: StoreTimeouts = { connectTimeoutMs: 500, poolWaitMs: 500, storeWaitMs: 1_500 };
/** Token lookup and the request's own transaction: two transactions, each pool wait plus store wait. */
const ANSWER_BOUND_MS = 2 * (FAST.poolWaitMs + FAST.storeWaitMs);

interface Service {
  url: string;
  store: Store;
  app: FastifyInstance;
  token: string;
  close(): Promise<void>;
}

/**
 * The service on a real socket, over its own store at `storeUrl`, with a write token and a cohort.
 * Its statement timeout is half a second within the store wait unless `statementTimeoutMs` says otherwise.
 */
async function startService(storeUrl: string, statementTimeoutMs = FAST.storeWaitMs - 500): Promise<Service> {
  const store = openPostgresStore(storeUrl, 10, FAST);
  const db = new Database(store, statementTimeoutMs);
  const app = await buildApp({ adminKey: ADMIN_KEY, redisUrl: undefined, readLimitPerMin: 100_000, writeLimitPerMin: 100_000, plannedCounts: true, logLevel: 'silent' }, db);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const admin = (path: string, body: unknown) => app.inject({ method: 'POST', url: `/admin/v1${path}`, headers: { authorization: `Bearer ${ADMIN_KEY}` }, payload: body as object }).then((r) => r.json());
  const university = (await admin('/universities', { name: `Fault University ${randomUUID()}` })).id;
  const { token } = await admin('/tokens', { university_id: university, can_write: true });
  await admin('/cohorts', {
    university_id: university, name: 'fault-2025', display_name: 'Fault', program: 'P', degree: 'BSc',
    start_date: '2025-09-01', end_date: '2028-06-30', intake_year: 2025, intake_term: 'Fall',
  });
  return {
    url, store, app, token,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

interface Answer {
  status: number;
  retryAfter: string | null;
  requestId: string | null;
  body: any;
  ms: number;
}

async function call(service: Service, path: string, init: RequestInit = {}): Promise<Answer> {
  const started = Date.now();
  const response = await fetch(`${service.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${service.token}`, 'content-type': 'application/json', ...init.headers },
    signal: AbortSignal.timeout(15_000),
  });
  return {
    status: response.status, retryAfter: response.headers.get('retry-after'), requestId: response.headers.get('x-request-id'),
    body: await response.json(), ms: Date.now() - started,
  };
}

const students = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({
  email: `${tag}.${i}@fault.example.edu`, first_name: 'F', last_name: `Row ${i}`, cohort_name: 'fault-2025', is_alumni: false,
}));
const putStudents = (service: Service, rows: unknown[]) => call(service, '/v1/students', { method: 'PUT', body: JSON.stringify({ students: rows }) });

function assertUnavailable(answer: Answer, what: string): void {
  assert.equal(answer.status, 503, `${what}: ${JSON.stringify(answer.body)}`);
  assert.equal(answer.retryAfter, '1', what);
  assert.deepEqual(Object.keys(answer.body).sort(), ['code', 'details', 'hint', 'message'], what);
  // A partner can name the request to support (docs/decisions.md, Errors).
  assert.ok(answer.requestId && String(answer.body.hint).includes(answer.requestId), `${what}: hint ${answer.body.hint}`);
}

if (process.env.TEST_DATABASE_URL) {
  describe('store faults on postgres', () => {
    let scratch: ScratchDatabase;
    let databaseName: string;
    let serverAdmin: postgres.Sql;

    before(async () => {
      scratch = await createScratchDatabase(process.env.TEST_DATABASE_URL!);
      databaseName = new URL(scratch.url).pathname.slice(1);
      const migrator = openPostgresStore(scratch.url, 1);
      await migrate(migrator);
      await migrator.close();
      serverAdmin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    });
    after(async () => {
      await serverAdmin.end();
      await scratch.drop();
    });

    const terminateServiceBackends = () => serverAdmin`
      select pg_terminate_backend(pid) from pg_stat_activity
      where datname = ${databaseName} and application_name = 'partner-data-service' and pid <> pg_backend_pid()`;

    test('backends terminated every 100-400 ms under reads and 500-row PUTs: every request answered, then recovery', async () => {
      const service = await startService(scratch.url);
      try {
        let running = true;
        const killer = (async () => {
          while (running) {
            await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 300));
            await terminateServiceBackends();
          }
        })();
        const answers: Answer[] = [];
        const loop = async (request: (i: number) => Promise<Answer>) => {
          for (let i = 0; running; i++) answers.push(await request(i));
        };
        const stopAfter = new Promise((resolve) => setTimeout(resolve, 3_000)).then(() => {
          running = false;
        });
        await Promise.all([
          stopAfter, killer,
          ...[1, 2, 3, 4].map(() => loop(() => call(service, '/v1/students?select=id,email&limit=50'))),
          ...[1, 2].map((w) => loop((i) => putStudents(service, students(`kill${w}-${i % 3}`, 500)))),
        ]);
        assert.ok(answers.length > 20, `only ${answers.length} requests ran`);
        for (const answer of answers) {
          if (answer.status !== 200) assertUnavailable(answer, 'during the kills');
        }
        assert.ok(answers.some((a) => a.status === 503), 'no request met a killed connection');
        // A request may still meet a session killed a moment ago, before its socket's close arrives.
        await eventually(async () => (await call(service, '/v1/students?select=id&limit=1')).status === 200, 2_000, 'the service recovered', 100);
        const write = await putStudents(service, students('after-kills', 500));
        assert.equal(write.status, 200);
        assert.equal(write.body.counts.rejected, 0);
      } finally {
        await service.close();
      }
    });

    test('over TLS (sslmode=require), a terminated backend costs only the requests in flight: the session\'s loss is seen as without TLS', async () => {
      const target = new URL(scratch.url);
      const terminator = new TlsTerminator({ host: target.hostname, port: Number(target.port || 5432) }, await selfSignedCredentials());
      const throughTls = new URL(scratch.url);
      throughTls.port = String(await terminator.listen());
      throughTls.searchParams.set('sslmode', 'require');
      const service = await startService(throughTls.toString());
      try {
        for (let i = 0; i < 5; i++) assert.equal((await call(service, '/v1/students?select=id&limit=1')).status, 200);
        await terminateServiceBackends();
        // Let the sessions' close arrive, as without TLS; then no request may draw a dead one.
        await new Promise((resolve) => setTimeout(resolve, 300));
        const after = [];
        for (let i = 0; i < 5; i++) after.push((await call(service, '/v1/students?select=id&limit=1')).status);
        assert.deepEqual(after, [200, 200, 200, 200, 200]);
      } finally {
        await service.close();
        await terminator.end();
      }
    });

    test('a database refusing connections (ALLOW_CONNECTIONS false, 55000) answers 503, then recovers', async () => {
      const service = await startService(scratch.url);
      try {
        await serverAdmin.unsafe(`alter database ${databaseName} allow_connections false`);
        await terminateServiceBackends();
        // Let the sessions' close arrive, so that the request opens a new connection.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const refused = await call(service, '/v1/students?limit=1');
        assertUnavailable(refused, 'refused');
        assert.equal(refused.body.code, 'DATABASE_UNAVAILABLE');
        assertUnavailable(await call(service, '/readyz'), 'readyz while refused');
        await serverAdmin.unsafe(`alter database ${databaseName} allow_connections true`);
        // As after the kills above: a request may still meet a session refused a moment ago, before
        // its socket's close arrives (seen in 2 of 3 runs on a loaded machine).
        await eventually(async () => (await call(service, '/v1/students?limit=1')).status === 200, 2_000, 'the service recovered', 100);
      } finally {
        await serverAdmin.unsafe(`alter database ${databaseName} allow_connections true`);
        await service.close();
      }
    });

    /** Holds `lock` on the scratch database until the returned function is called. */
    async function holdLock(lock: string): Promise<() => Promise<void>> {
      const holder = postgres(scratch.url, { max: 1, onnotice: () => {} });
      let release!: () => void;
      const released = new Promise<void>((resolve) => { release = resolve; });
      let held!: () => void;
      const holding = new Promise<void>((resolve) => { held = resolve; });
      const transaction = holder.begin(async (tx) => {
        await tx.unsafe(lock);
        held();
        await released;
      });
      await holding;
      return async () => {
        release();
        await transaction;
        await holder.end();
      };
    }

    /** The service's backends on the scratch database that wait for a lock. */
    const backendsWaitingForLocks = async () => Number((await serverAdmin<{ n: string }[]>`
      select count(*) as n from pg_stat_activity
      where datname = ${databaseName} and application_name = 'partner-data-service' and wait_event_type = 'Lock'`)[0].n);

    test('an operator call behind a held table lock is 503 QUERY_TIMEOUT within the statement timeout, and leaves no backend behind (it had no statement timeout: 503 DATABASE_UNAVAILABLE at the store wait, its backend waiting on)', async () => {
      const service = await startService(scratch.url);
      const release = await holdLock('lock table universities in access exclusive mode');
      try {
        const started = Date.now();
        const response = await service.app.inject({
          method: 'POST', url: '/admin/v1/universities', headers: { authorization: `Bearer ${ADMIN_KEY}` }, payload: { name: 'Behind A Lock University' },
        });
        assert.equal(response.statusCode, 503, response.body);
        assert.equal(response.json().code, 'QUERY_TIMEOUT');
        assert.ok(Date.now() - started < FAST.storeWaitMs, `answered in ${Date.now() - started} ms`);
        assert.equal(await backendsWaitingForLocks(), 0);
      } finally {
        await release();
        await service.close();
      }
    });

    test('a session the service gave up on (the store wait, shorter here than the statement timeout) while its backend waits for a lock ends that backend within seconds, not when the lock is released', async () => {
      const service = await startService(scratch.url, 30_000);
      const release = await holdLock('lock table students in access exclusive mode');
      try {
        const reads = await Promise.all([1, 2, 3].map(() => call(service, '/v1/students?select=id&limit=1')));
        for (const read of reads) {
          assertUnavailable(read, 'a read behind the lock');
          assert.equal(read.body.code, 'DATABASE_UNAVAILABLE');
        }
        await eventually(async () => (await backendsWaitingForLocks()) === 0, 4_000, 'the abandoned backends ended', 100);
      } finally {
        await release();
        await service.close();
      }
    });

    describe('through a port that closes and stalls', () => {
      let port: FaultyPort;
      let service: Service;

      before(async () => {
        const server = new URL(scratch.url);
        port = new FaultyPort({ host: server.hostname, port: Number(server.port || 5432) });
        const proxied = new URL(scratch.url);
        proxied.port = String(await port.listen());
        service = await startService(proxied.toString());
      });
      after(async () => {
        await service.close();
        await port.end();
      });

      test('a closed port: reads and writes answer 503 within the bound, /healthz 200, /readyz 503; then recovery', async () => {
        port.close();
        const answers = await Promise.all([
          call(service, '/v1/students?limit=5'),
          putStudents(service, students('closed', 500)),
          call(service, '/readyz'),
        ]);
        for (const answer of answers) {
          assertUnavailable(answer, 'closed port');
          assert.ok(answer.ms < ANSWER_BOUND_MS, `answered in ${answer.ms} ms`);
        }
        assert.equal((await call(service, '/healthz')).status, 200);
        port.resume();
        await eventually(async () => (await call(service, '/v1/students?limit=5')).status === 200, 3_000, 'the service recovered', 100);
        assert.equal((await call(service, '/readyz')).status, 200);
      });

      test('a stalled network: every request answers within the bound, /healthz at once; then recovery', async () => {
        // Warm connections first, so the stall hits open sessions as well as new ones.
        await Promise.all([1, 2, 3].map(() => call(service, '/v1/students?limit=5')));
        port.stall();
        const health = await call(service, '/healthz');
        assert.equal(health.status, 200);
        assert.ok(health.ms < 500, `healthz took ${health.ms} ms`);
        const answers = await Promise.all([
          ...[1, 2, 3].map(() => call(service, '/v1/students?limit=5')),
          putStudents(service, students('stalled', 500)),
          call(service, '/readyz'),
        ]);
        for (const answer of answers) {
          assertUnavailable(answer, 'stalled network');
          assert.ok(answer.ms < ANSWER_BOUND_MS, `answered in ${answer.ms} ms`);
        }
        port.resume();
        await eventually(async () => (await call(service, '/v1/students?limit=5')).status === 200, 3_000, 'the service recovered', 100);
        const write = await putStudents(service, students('stalled', 500));
        assert.equal(write.status, 200);
      });
    });

    test('/readyz answers 503 NOT_READY on a store that is not migrated', async () => {
      const fresh = await openTestStore('postgres', { migrated: false });
      const app = await buildApp({ adminKey: undefined, redisUrl: undefined, readLimitPerMin: 100, writeLimitPerMin: 100, plannedCounts: true, logLevel: 'silent' }, new Database(fresh.store, 1_000));
      try {
        const res = await app.inject({ method: 'GET', url: '/readyz' });
        assert.equal(res.statusCode, 503);
        assert.equal(res.headers['retry-after'], '1');
        assert.equal(res.json().code, 'NOT_READY');
      } finally {
        await app.close();
        await fresh.drop();
      }
    });
  });
}
