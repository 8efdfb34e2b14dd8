/**
 * pds-sync run as a child process (through its package.json launcher) against the service on a
 * listening port, with CSV files in a temporary folder: a sync of a few thousand rows, a rerun, a
 * dry run, the reject report, retries through a proxy that answers 503, 429 or drops the
 * connection mid-run, bad input refused before anything is sent, and its output on a pipe and
 * on a terminal.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { type IncomingMessage, type Server, type ServerResponse, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { LIMITS } from '../src/limits.ts';
import { backoffMs, idempotencyKey, isRetryable, retryAfterMs } from '../tools/pds-sync/client.ts';
import { readInputFile } from '../tools/pds-sync/csv-input.ts';
import { Harness, backends } from './support/harness.ts';

const BIN = fileURLToPath(new URL('../tools/pds-sync/bin.mjs', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function runSync(args: string[], options: { cwd: string; env?: Record<string, string | undefined> }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: options.cwd, env: { ...process.env, ...options.env }, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The summary table's line for a resource: its counts by outcome. */
function summaryOf(stdout: string, resource: string): Record<string, number> | undefined {
  const lines = stdout.split('\n');
  const header = lines.find((l) => /^resource\s+created\s+updated\s+unchanged\s+rejected$/.test(l));
  if (!header) return undefined;
  const line = lines.slice(lines.indexOf(header)).find((l) => l.startsWith(`${resource} `));
  if (!line) return undefined;
  const [, created, updated, unchanged, rejected] = line.trim().split(/\s+/);
  return { created: Number(created), updated: Number(updated), unchanged: Number(unchanged), rejected: Number(rejected) };
}

const csv = (rows: unknown[][]) => stringify(rows);

/** A proxy in front of the service that can answer a request itself; it records what it saw. */
class Proxy {
  readonly seen: { at: number; method: string; key: string | undefined; prefer: string | undefined; status: number; replayed: boolean }[] = [];
  private readonly server: Server;
  /**
   * What to do with the n-th request (from 1): answer it itself (true), forward it (false), or
   * forward it and drop the connection instead of passing the answer on ('lose-answer').
   */
  script: (n: number, req: IncomingMessage, res: ServerResponse) => boolean | 'lose-answer' = () => false;

  constructor(private readonly target: URL | null) {
    this.server = createServer((req, res) => {
      const n = this.seen.length + 1;
      const entry = {
        at: Date.now(), method: req.method ?? '', key: req.headers['idempotency-key'] as string | undefined, prefer: req.headers.prefer as string | undefined,
        status: 0, replayed: false,
      };
      this.seen.push(entry);
      res.on('finish', () => { entry.status = res.statusCode; });
      const action = this.script(n, req, res);
      if (action === true) return;
      if (!this.target) {
        res.writeHead(502).end();
        return;
      }
      const upstream = httpRequest({ host: this.target.hostname, port: this.target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        entry.replayed = answer.headers['idempotent-replayed'] === 'true';
        if (action === 'lose-answer') {
          answer.resume();
          answer.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('pds-sync pure parts', () => {
  test('the Idempotency-Key depends on the run, the batch\'s number and everything sent, and on nothing else', () => {
    const run = '3f2c9a1e-run';
    const key = idempotencyKey(run, '1', 'PUT', '/v1/students', null, '{"students":[1]}');
    assert.equal(key, idempotencyKey(run, '1', 'PUT', '/v1/students', null, '{"students":[1]}'));
    assert.match(key, /^pds-sync-3f2c9a1e-run-[0-9a-f]{64}$/);
    for (const other of [
      idempotencyKey('another-run', '1', 'PUT', '/v1/students', null, '{"students":[1]}'),
      // The same rows as the next batch (a row repeated in the export): a key of its own.
      idempotencyKey(run, '2', 'PUT', '/v1/students', null, '{"students":[1]}'),
      // Batch 1's raced rows sent again.
      idempotencyKey(run, '1.1', 'PUT', '/v1/students', null, '{"students":[1]}'),
      idempotencyKey(run, '1', 'POST', '/v1/students', null, '{"students":[1]}'),
      idempotencyKey(run, '1', 'PUT', '/v1/cohorts', null, '{"students":[1]}'),
      idempotencyKey(run, '1', 'PUT', '/v1/students', 'tx=rollback, handling=strict', '{"students":[1]}'),
      idempotencyKey(run, '1', 'PUT', '/v1/students', null, '{"students":[2]}'),
    ]) assert.notEqual(other, key);
  });

  test('CSV columns: a needed field is fed by a column named like it whatever its case and word separators; an optional one only by its exact name, the other told; rows of empty cells are skipped', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-sync-columns-'));
    try {
      const path = join(dir, 'students.csv');
      const needed = ['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni'];
      await writeFile(path, ['EMAIL,First Name,last-name,Cohort_Name,is_alumni,Phone', 'a@example.edu,Ada,Lovelace,cs,no,+441632960000', ',,,,,', ' , ,,,, ', 'b@example.edu,Bo,Li,cs,yes,'].join('\r\n'));
      const read = await readInputFile('students', path, { mapping: {}, needed, emptyAsNull: false });
      assert.deepEqual(read.rows.map((r) => r.line), [2, 5]);
      assert.deepEqual(read.rows[0].body, { email: 'a@example.edu', first_name: 'Ada', last_name: 'Lovelace', cohort_name: 'cs', is_alumni: false });
      assert.deepEqual(read.unsent, [`${path}: the column "Phone" is named like students.phone but does not feed it, so it is not sent; to send it, map it (--map students.phone=Phone).`]);
      const mapped = await readInputFile('students', path, { mapping: { phone: 'Phone' }, needed, emptyAsNull: true });
      assert.deepEqual([mapped.rows[0].body.phone, mapped.rows[1].body.phone, mapped.unsent], ['+441632960000', null, []]);
      // A column the mapping gives to one field is not taken for another by its name.
      await writeFile(path, ['Email,External ID', 'a@example.edu,N-1'].join('\n'));
      await assert.rejects(readInputFile('students', path, { mapping: { external_id: 'Email' }, needed: ['email'], emptyAsNull: false }),
        /students\.csv: no column for students\.email, which this mode needs/);
      await writeFile(path, ['Email,EMAIL,phone', 'a@example.edu,a@example.edu,'].join('\n'));
      await assert.rejects(readInputFile('students', path, { mapping: {}, needed: ['email'], emptyAsNull: false }),
        /students\.csv: the columns "Email" and "EMAIL" both name students\.email; map the one to send/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('CSV rows: the line each record starts on (CRLF, blank lines, quoted line breaks) and values by field kind', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-sync-csv-'));
    try {
      const path = join(dir, 'cohorts.csv');
      await writeFile(path, [
        '\uFEFFname,Title,program,degree,start_date,end_date,intake_year,intake_term,resume_template_names,study_mode',
        'a,"Two\r\nLines",P,D,2024-01-01,2025-01-01,2024,Fall,Classic; Modern,',
        '',
        'b,B,P,D,2024-01-01,2025-01-01,twenty,Fall,,online',
      ].join('\r\n'));
      const read = (emptyAsNull: boolean) => readInputFile('cohorts', path, { mapping: { display_name: 'Title' }, needed: ['name', 'display_name'], emptyAsNull });
      const { rows } = await read(false);
      assert.deepEqual(rows.map((r) => r.line), [2, 5]);
      assert.deepEqual(rows[0].body, {
        name: 'a', display_name: 'Two\nLines', program: 'P', degree: 'D', start_date: '2024-01-01', end_date: '2025-01-01',
        intake_year: 2024, intake_term: 'Fall', resume_template_names: ['Classic', 'Modern'],
      });
      assert.equal(rows[1].body.intake_year, 'twenty', 'a value the kind cannot read is sent as it is, for the service to refuse');
      assert.equal(rows[1].fields.Title, 'B');
      assert.deepEqual((await read(true)).rows[0].body.study_mode, null);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('retried: 429, 5xx and a 409 whose key is in use; not other refusals', () => {
    for (const [status, code] of [[429, 'RATE_LIMITED'], [500, 'INTERNAL'], [503, undefined], [409, 'IDEMPOTENCY_KEY_IN_USE']] as const) assert.ok(isRetryable(status, code), `${status} ${code}`);
    for (const [status, code] of [[409, 'CONFLICT'], [422, 'IDEMPOTENCY_KEY_REUSED'], [400, 'INVALID_BODY'], [403, 'WRITE_NOT_ENABLED'], [409, undefined]] as const) assert.ok(!isRetryable(status, code), `${status} ${code}`);
  });

  test('Retry-After is read as seconds or as an HTTP date', () => {
    assert.equal(retryAfterMs('3'), 3000);
    assert.equal(retryAfterMs(new Date(10_000 + 5_000).toUTCString(), 10_000), 5000);
    assert.equal(retryAfterMs(null), null);
    assert.equal(retryAfterMs('soon'), null);
  });

  test('back-off doubles per retry with jitter, is capped, and never undercuts Retry-After', () => {
    const policy = { baseDelayMs: 1000, maxDelayMs: 8000 };
    assert.equal(backoffMs(1, policy, null, () => 0), 500);
    assert.equal(backoffMs(1, policy, null, () => 1), 1000);
    assert.equal(backoffMs(3, policy, null, () => 1), 4000);
    assert.equal(backoffMs(10, policy, null, () => 1), 8000);
    assert.equal(backoffMs(1, policy, 30_000, () => 0), 30_000);
    assert.ok(backoffMs(1, policy, 30_000, () => 1) > 30_000);
    assert.ok(backoffMs(1, policy, 30_000, () => 1) <= 31_000);
  });
});

/** The answer the service gives a batch of one student row, created. */
const CREATED_ONE = JSON.stringify({
  counts: { created: 1, updated: 0, unchanged: 0, rejected: 0 }, dropped_fields: [], results: [{ email: 'a@example.edu', status: 'created' }],
});
const IN_USE: [number, string] = [409, JSON.stringify({ code: 'IDEMPOTENCY_KEY_IN_USE', message: 'still being processed', details: null, hint: null })];

/** Syncs one student row (`--max-attempts 2`) through a proxy that refuses it with `refusals` first, each with Retry-After: 0, then answers it. */
async function syncOneRowAfter(refusals: readonly [number, string][], retryBaseMs: number) {
  const dir = await mkdtemp(join(tmpdir(), 'pds-sync-refused-'));
  const proxy = new Proxy(null);
  proxy.script = (n, _req, res) => {
    const [status, body] = refusals[n - 1] ?? [200, CREATED_ONE];
    res.writeHead(status, { 'content-type': 'application/json', ...(status === 200 ? {} : { 'retry-after': '0' }) }).end(body);
    return true;
  };
  const url = await proxy.start();
  try {
    await writeFile(join(dir, 'students.csv'), csv([['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni'], ['a@example.edu', 'Ada', 'Lovelace', 'cs', 'false']]));
    const run = await runSync(['--url', url, '--students', 'students.csv', '--max-attempts', '2', '--retry-base-ms', String(retryBaseMs)], { cwd: dir, env: { PDS_TOKEN: 'pds_not_checked' } });
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 1, updated: 0, unchanged: 0, rejected: 0 });
    return proxy.seen;
  } finally {
    await proxy.close();
    await rm(dir, { recursive: true, force: true });
  }
}

// Each case is a process of its own and none reaches the service: they run side by side.
describe('pds-sync and a batch whose key is in use', () => {
  test('409 IDEMPOTENCY_KEY_IN_USE is retried past --max-attempts while the key\'s lease may run: a crashed service\'s key is freed when it ends', async () => {
    // Four answers as a service gives while an earlier attempt's claim holds the key, then the batch's.
    const seen = await syncOneRowAfter([IN_USE, IN_USE, IN_USE, IN_USE], 1);
    assert.equal(seen.length, 5);
    assert.equal(new Set(seen.map((s) => s.key)).size, 1, 'every attempt carries the batch\'s one key');
  });

  test('a held key is waited out through a 429 and a 503 in between, asked again after a growing back-off: a 429 ended the run', async () => {
    const refusals: [number, string][] = [
      IN_USE, [429, '{"code":"RATE_LIMITED","message":"Too many writes.","details":null,"hint":null}'], IN_USE,
      [503, '{"code":"DATABASE_UNAVAILABLE","message":"restarting","details":null,"hint":null}'], IN_USE, IN_USE,
    ];
    const seen = await syncOneRowAfter(refusals, 40);
    assert.deepEqual(seen.map((s) => s.status), [...refusals.map(([status]) => status), 200]);
    // After the key's fourth refusal as held, the next ask waited at least half its step, 40 ms × 2³.
    assert.ok(seen[6].at - seen[5].at >= 160, `the ask after the fourth held-key refusal came ${seen[6].at - seen[5].at} ms after it`);
  });
});

describe('pds-sync and rows that lost a race', () => {
  test('rows answered CONCURRENT_WRITE are sent again, on their own and under keys of their own, until decided or the attempts run out', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-sync-raced-'));
    // What the service answers each request, row by row: the batch of four loses two rows to a
    // race, their resend one of them, and that one loses again on the last attempt.
    const answers = [['created', 'raced', 'updated', 'raced'], ['created', 'raced'], ['raced']];
    const sent: string[][] = [];
    const proxy = new Proxy(null);
    proxy.script = (n, req, res) => {
      let text = '';
      req.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; }).on('end', () => {
        const rows = (JSON.parse(text) as { students: { email: string }[] }).students;
        sent.push(rows.map((row) => row.email));
        const results = rows.map(({ email }, i) => (answers[n - 1][i] === 'raced'
          ? { email, status: 'rejected', code: 'CONCURRENT_WRITE', message: 'Another write raced this row at the same moment, and again on its retry; retry the row.' }
          : { email, status: answers[n - 1][i] }));
        const counts = { created: 0, updated: 0, unchanged: 0, rejected: 0 };
        for (const result of results) counts[result.status as keyof typeof counts]++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ counts, dropped_fields: [], results }));
      });
      return true;
    };
    const url = await proxy.start();
    try {
      await writeFile(join(dir, 'students.csv'), csv([
        ['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni'],
        ...['a', 'b', 'c', 'd'].map((name) => [`${name}@example.edu`, name, 'Student', 'cs', 'false']),
      ]));
      const run = await runSync(['--url', url, '--students', 'students.csv', '--max-attempts', '3', '--retry-base-ms', '1'], { cwd: dir, env: { PDS_TOKEN: 'pds_not_checked' } });
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.deepEqual(sent, [['a@example.edu', 'b@example.edu', 'c@example.edu', 'd@example.edu'], ['b@example.edu', 'd@example.edu'], ['d@example.edu']]);
      assert.equal(new Set(proxy.seen.map((s) => s.key)).size, 3, 'each resend has a key of its own');
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 2, updated: 1, unchanged: 0, rejected: 1 });
      assert.match(run.stdout, /students: batch 1: 2 rows lost a race to another write \(CONCURRENT_WRITE\); sending them again/);
      const report = parse(await readFile(join(dir, 'pds-sync-rejects.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
      assert.deepEqual(report.map((r) => [r.line, r.status, r.code, r.email]), [['5', 'rejected', 'CONCURRENT_WRITE', 'd@example.edu']]);
    } finally {
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('pds-sync and a resend that fails', () => {
  test('the batch\'s answer is still counted and reported: it was written before its raced rows were sent again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-sync-resend-'));
    const proxy = new Proxy(null);
    proxy.script = (n, req, res) => {
      req.resume().on('end', () => {
        if (n === 1) {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
            counts: { created: 1, updated: 0, unchanged: 0, rejected: 1 }, dropped_fields: [],
            results: [{ email: 'a@example.edu', status: 'created' }, { email: 'b@example.edu', status: 'rejected', code: 'CONCURRENT_WRITE', message: 'retry the row' }],
          }));
        } else {
          res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'WRITE_NOT_ENABLED', message: 'read token', details: null, hint: null }));
        }
      });
      return true;
    };
    const url = await proxy.start();
    try {
      await writeFile(join(dir, 'students.csv'), csv([
        ['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni'], ['a@example.edu', 'A', 'S', 'cs', 'false'], ['b@example.edu', 'B', 'S', 'cs', 'false'],
      ]));
      const run = await runSync(['--url', url, '--students', 'students.csv', '--retry-base-ms', '1'], { cwd: dir, env: { PDS_TOKEN: 'pds_not_checked' } });
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.match(run.stderr, /403 WRITE_NOT_ENABLED/);
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 1, updated: 0, unchanged: 0, rejected: 1 });
      const report = parse(await readFile(join(dir, 'pds-sync-rejects.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
      assert.deepEqual(report.map((r) => [r.code, r.email]), [['CONCURRENT_WRITE', 'b@example.edu']]);
    } finally {
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('pds-sync stopped by a signal', () => {
  test('SIGTERM mid-run: the report is this run\'s (an earlier one is gone), the answers so far are in it, and the run id to continue with is given', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pds-sync-signal-'));
    // The first batch is answered with its row rejected; the second never is.
    const proxy = new Proxy(null);
    proxy.script = (n, _req, res) => {
      if (n === 1) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
          counts: { created: 0, updated: 0, unchanged: 0, rejected: 1 }, dropped_fields: [],
          results: [{ email: 'a@example.edu', status: 'rejected', code: 'COHORT_NOT_FOUND', message: 'No cohort named "cs".' }],
        }));
      }
      return true;
    };
    const url = await proxy.start();
    try {
      await writeFile(join(dir, 'students.csv'), csv([
        ['email', 'first_name', 'last_name', 'cohort_name', 'is_alumni'],
        ['a@example.edu', 'Ada', 'Lovelace', 'cs', 'false'], ['b@example.edu', 'Bo', 'Lee', 'cs', 'false'], ['c@example.edu', 'Cy', 'Ng', 'cs', 'false'],
      ]));
      await writeFile(join(dir, 'rejects.csv'), 'resource,file,line,code,message\nstudents,old.csv,9,STALE,from last night\n');
      const child = spawn(process.execPath, [BIN, '--url', url, '--students', 'students.csv', '--batch-size', '1', '--reject-report', 'rejects.csv'],
        { cwd: dir, env: { ...process.env, PDS_TOKEN: 'pds_not_checked' } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => { stdout += chunk; });
      child.stderr.on('data', (chunk) => { stderr += chunk; });
      for (let i = 0; i < 200 && proxy.seen.length < 2; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal(proxy.seen.length, 2, 'the second batch was never sent');
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 1, stdout + stderr);
      const runId = /Run (\S+): should it stop, the same command with --run-id \1 continues it\./.exec(stdout)?.[1];
      assert.ok(runId, stdout);
      assert.match(stderr, new RegExp(`stopped by SIGTERM[\\s\\S]*--run-id ${runId}`));
      const report = parse(await readFile(join(dir, 'rejects.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
      assert.deepEqual(report.map((r) => [r.code, r.email]), [['COHORT_NOT_FOUND', 'a@example.edu']]);
      assert.equal(proxy.seen.length, 2, 'a batch was sent after the signal');
    } finally {
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('pds-sync: bad input is refused before anything is sent', { concurrency: true }, () => {
  let dir: string;
  let proxy: Proxy;
  let url: string;
  const env = { PDS_TOKEN: 'pds_not_checked' };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pds-sync-input-'));
    proxy = new Proxy(null);
    url = await proxy.start();
    await writeFile(join(dir, 'students.csv'), csv([
      ['Email', 'First', 'Last', 'Cohort', 'Alumni'],
      ['a@example.edu', 'Ada', 'Lovelace', 'cs', 'no'],
    ]));
    await writeFile(join(dir, 'unclosed.csv'), 'email,first_name,last_name,cohort_name,is_alumni\na@example.edu,Ada,"Love,cs,false\n');
    await writeFile(join(dir, 'ragged.csv'), 'email,first_name,last_name,cohort_name,is_alumni\na@example.edu,Ada,Lovelace,cs,false\nb@example.edu,Bo,Lee,cs,false,extra\n');
    await writeFile(join(dir, 'config.json'), JSON.stringify({ url, students: { file: 'students.csv', columns: { email: 'Email', first_name: 'First', last_name: 'Last', cohort_name: 'Cohort', is_alumni: 'Alumni' } } }));
    await writeFile(join(dir, 'bad-config.json'), JSON.stringify({ url, students: { file: 'students.csv', columns: { birthday: 'Born' } } }));
    await writeFile(join(dir, 'empty-token'), '\n');
    await symlink('students.csv', join(dir, 'students-link.csv'));
    // Zoë Müller as a Latin-1 export writes her: read as UTF-8, each accent would be U+FFFD.
    await writeFile(join(dir, 'latin1.csv'), Buffer.from('email,first_name,last_name,cohort_name,is_alumni\nzoe@example.edu,Zo\xeb,M\xfcller,cs,false\n', 'latin1'));
    await writeFile(join(dir, 'long-cell.csv'), `email,first_name,last_name,cohort_name,is_alumni\na@example.edu,Ada,Lovelace,cs,false\nb@example.edu,${'B'.repeat(LIMITS.bodyBytes)},Lee,cs,false\n`);
    await writeFile(join(dir, 'slow-config.json'), JSON.stringify({ url, timeoutMs: 3_000_000_000, students: { file: 'students.csv', columns: { email: 'Email', first_name: 'First', last_name: 'Last', cohort_name: 'Cohort', is_alumni: 'Alumni' } } }));
  });
  after(async () => {
    await proxy.close();
    await rm(dir, { recursive: true, force: true });
  });

  const mapped = ['--map', 'students.email=Email', '--map', 'students.first_name=First', '--map', 'students.last_name=Last', '--map', 'students.cohort_name=Cohort', '--map', 'students.is_alumni=Alumni'];
  const cases: { name: string; args: () => string[]; env?: Record<string, string | undefined>; message: RegExp }[] = [
    { name: 'a mapped column the file lacks', args: () => ['--url', url, '--students', 'students.csv', ...mapped, '--map', 'students.phone=Mobile'], message: /column "Mobile" mapped to students\.phone is not in the file's header/ },
    { name: 'a field the mode needs without a column', args: () => ['--url', url, '--students', 'students.csv', '--map', 'students.email=Email'], message: /no column for students\.first_name, students\.last_name, students\.cohort_name, students\.is_alumni/ },
    { name: 'a file that is not UTF-8 (Latin-1)', args: () => ['--url', url, '--students', 'latin1.csv'], message: /latin1\.csv: the students file is not UTF-8 text; export it as "CSV UTF-8"/ },
    { name: 'a configuration timeout past what a flag may give', args: () => ['--config', 'slow-config.json'], message: /slow-config\.json: \/timeoutMs must be <= 3600000/ },
    { name: 'a cell that makes its batch larger than the service takes', args: () => ['--url', url, '--students', 'long-cell.csv'], message: new RegExp(`long-cell\\.csv: a batch of lines 2–3 would be [\\d,]+ bytes, over the service's ${LIMITS.bodyBytes.toLocaleString('en-US')}; its largest row is line 3`) },
    { name: 'an unclosed quote', args: () => ['--url', url, '--students', 'unclosed.csv'], message: /unclosed\.csv: Quote Not Closed/ },
    { name: 'a line with more cells than the header', args: () => ['--url', url, '--students', 'ragged.csv'], message: /ragged\.csv: Invalid Record Length: expect 5, got 6 on line 3/ },
    { name: 'an unknown option', args: () => ['--url', url, '--students', 'students.csv', '--frobnicate'], message: /unknown option '--frobnicate'/ },
    { name: 'a missing file', args: () => ['--url', url, '--students', 'nowhere.csv'], message: /nowhere\.csv: cannot read the students file \(ENOENT\)/ },
    { name: 'a missing configuration file', args: () => ['--config', 'nowhere.json'], message: /nowhere\.json: cannot read the configuration file/ },
    { name: 'a configuration mapping a field the resource lacks', args: () => ['--config', 'bad-config.json'], message: /bad-config\.json: \/students\/columns must not have additional properties: birthday/ },
    { name: 'a non-numeric batch size', args: () => ['--config', 'config.json', '--batch-size', 'lots'], message: /--batch-size <rows>' argument 'lots' is invalid\. Not a whole number/ },
    { name: 'a batch size over the limit', args: () => ['--config', 'config.json', '--batch-size', '501'], message: /argument '501' is invalid\. Must be from 1 to 500/ },
    { name: 'an unknown mode', args: () => ['--config', 'config.json', '--mode', 'merge'], message: /argument 'merge' is invalid\. Allowed choices are put, post, patch/ },
    { name: 'a mapping of an unknown field', args: () => ['--config', 'config.json', '--map', 'students.birthday=Born'], message: /students has no field "birthday"/ },
    { name: 'no token', args: () => ['--config', 'config.json'], env: { PDS_TOKEN: undefined }, message: /no token: set PDS_TOKEN or pass --token-file/ },
    { name: 'an empty token file', args: () => ['--config', 'config.json', '--token-file', 'empty-token'], message: /empty-token: the token file is empty/ },
    { name: 'no URL', args: () => ['--students', 'students.csv', ...mapped], message: /no service URL/ },
    { name: 'nothing to sync', args: () => ['--url', url], message: /nothing to sync/ },
    { name: 'a reject report over an input file', args: () => ['--config', 'config.json', '--reject-report', 'students.csv'], message: /the reject report students\.csv would overwrite an input file/ },
    { name: 'a reject report over an input file through a link', args: () => ['--config', 'config.json', '--reject-report', 'students-link.csv'], message: /the reject report students-link\.csv would overwrite an input file/ },
    { name: 'a reject report that cannot be written', args: () => ['--config', 'config.json', '--reject-report', 'students.csv/rejects.csv'], message: /cannot write the reject report students\.csv\/rejects\.csv \((EEXIST|ENOTDIR)\)/ },
  ];
  for (const { name, args, env: extra, message } of cases) {
    test(name, async () => {
      const run = await runSync(args(), { cwd: dir, env: { ...env, ...extra } });
      assert.equal(run.code, 1, run.stdout + run.stderr);
      assert.match(run.stderr, message);
      assert.equal(proxy.seen.length, 0, 'a request was sent');
    });
  }

  test('a run stopped by bad input leaves its report with the header alone: an earlier night\'s rejections never stay', async () => {
    await writeFile(join(dir, 'old-rejects.csv'), 'resource,file,line,status,code,message,notes\nstudents,students.csv,7,rejected,INVALID_EMAIL,yesterday,\n');
    const run = await runSync(['--url', url, '--students', 'ragged.csv', '--reject-report', 'old-rejects.csv'], { cwd: dir, env });
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.equal(await readFile(join(dir, 'old-rejects.csv'), 'utf8'), 'resource,file,line,status,code,message,notes\n');
  });

  test('the same configuration without the bad flags is good input: it reaches the service', async () => {
    const other = new Proxy(null);
    const otherUrl = await other.start();
    try {
      // The reject report's folder need not exist: it is made before anything is sent.
      const run = await runSync(['--config', 'config.json', '--url', otherUrl, '--max-attempts', '1', '--reject-report', 'tonight/rejects.csv'], { cwd: dir, env });
      assert.equal(run.code, 1);
      assert.match(run.stderr, /PUT \/v1\/students failed after 1 attempt: 502/);
      assert.equal(other.seen.length, 1);
      assert.match(await readFile(join(dir, 'tonight', 'rejects.csv'), 'utf8'), /^resource,file,line,status,code,message,notes/);
    } finally {
      await other.close();
    }
  });
});

for (const backend of backends()) {
  describe(`pds-sync against the service on ${backend}`, () => {
    let h: Harness;
    let dir: string;
    let serviceUrl: string;
    let university: string;
    let env: Record<string, string>;
    const STUDENTS = 1_200;

    const COHORT_HEADER = ['Code', 'Title', 'Programme', 'Award', 'Starts', 'Ends', 'Intake Year', 'Term', 'Campus', 'Templates'];
    const cohortRows = (tag: string) => [
      [`${tag}-cs`, 'Computer Science', 'Computer Science', 'BSc', '2024-09-01', '2999-06-30', '2024', 'Fall', 'Main', ''],
      [`${tag}-hist`, 'History', 'History', 'BA', '2018-09-01', '2021-06-30', '2018', 'Spring', '', ''],
    ];
    const STUDENT_HEADER = ['Student Number', 'Email', 'Given Name', 'Family Name', 'Class', 'Alumnus', 'Mobile'];
    const studentRows = (tag: string, count: number) => Array.from({ length: count }, (_, i) => [
      `${tag}-${i}`, `${tag}.${i}@sync.example.edu`, 'Given', `Family ${i}`, i % 2 ? `${tag}-cs` : `${tag}-hist`, i % 2 ? 'no' : 'yes', '',
    ]);
    const COLUMNS = {
      cohorts: { name: 'Code', display_name: 'Title', program: 'Programme', degree: 'Award', start_date: 'Starts', end_date: 'Ends', intake_year: 'Intake Year', intake_term: 'Term', campus_name: 'Campus', resume_template_names: 'Templates' },
      students: { external_id: 'Student Number', email: 'Email', first_name: 'Given Name', last_name: 'Family Name', cohort_name: 'Class', is_alumni: 'Alumnus', phone: 'Mobile' },
    };

    /** Writes a configuration and the two CSV files for a data set tagged `tag`; returns the configuration's name. */
    async function dataSet(tag: string, count: number, url = serviceUrl, extraStudents: unknown[][] = []): Promise<string> {
      await writeFile(join(dir, `${tag}-cohorts.csv`), csv([COHORT_HEADER, ...cohortRows(tag)]));
      await writeFile(join(dir, `${tag}-students.csv`), csv([STUDENT_HEADER, ...studentRows(tag, count), ...extraStudents]));
      await writeFile(join(dir, `${tag}.json`), JSON.stringify({
        url, rejectReport: `${tag}-rejects.csv`,
        cohorts: { file: `${tag}-cohorts.csv`, columns: COLUMNS.cohorts },
        students: { file: `${tag}-students.csv`, columns: COLUMNS.students },
      }, null, 2));
      return `${tag}.json`;
    }
    const studentsOf = (tag: string) => h.sql<{ email: string; is_alumni: boolean; external_id: string }>(
      `select email, is_alumni, external_id from students where university_id = $1 and email like $2 order by email`, [university, `${tag}.%`]);

    before(async () => {
      h = await Harness.start(backend);
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      serviceUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
      university = (await h.admin('POST', '/universities', { name: 'Sync University' })).json.id;
      await h.admin('POST', '/campuses', { university_id: university, name: 'Main' });
      env = { PDS_TOKEN: (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token };
      dir = await mkdtemp(join(tmpdir(), 'pds-sync-'));
    });
    after(async () => {
      await h.close();
      await rm(dir, { recursive: true, force: true });
    });

    test('a sync of a few thousand rows: cohorts first, students in batches, plain lines on a pipe; a rerun changes nothing', async () => {
      const config = await dataSet('happy', STUDENTS);
      const run = await runSync(['--config', config, '--batch-size', '500'], { cwd: dir, env });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.deepEqual(summaryOf(run.stdout, 'cohorts'), { created: 2, updated: 0, unchanged: 0, rejected: 0 });
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: STUDENTS, updated: 0, unchanged: 0, rejected: 0 });
      const lines = run.stdout.split('\n');
      assert.ok(lines.indexOf('cohorts: 2 rows in 1 batch') < lines.indexOf(`students: ${STUDENTS} rows in 3 batches`));
      assert.ok(lines.some((l) => /^students: batch 3\/3 done, 1200\/1200 rows, \d+ rows\/s \(created 200, updated 0, unchanged 0, rejected 0\)$/.test(l)), run.stdout);
      assert.doesNotMatch(run.stdout, /\r|\x1b\[/, 'no bar or terminal control on a pipe');
      const stored = await studentsOf('happy');
      assert.equal(stored.length, STUDENTS);
      assert.deepEqual(stored.find((s) => s.email === 'happy.7@sync.example.edu'), { email: 'happy.7@sync.example.edu', is_alumni: false, external_id: 'happy-7' });
      assert.equal(stored.find((s) => s.email === 'happy.8@sync.example.edu')!.is_alumni, true);
      const [cohort] = await h.sql<{ campus_name: string; intake_year: number; resume_template_names: string[] }>(
        `select c.name, p.name as campus_name, c.intake_year, c.resume_template_names from cohorts c left join campuses p on p.id = c.campus_id where c.university_id = $1 and c.name = 'happy-cs'`, [university]);
      assert.deepEqual({ ...cohort }, { name: 'happy-cs', campus_name: 'Main', intake_year: 2024, resume_template_names: [] });
      assert.deepEqual(parse(await readFile(join(dir, 'happy-rejects.csv'), 'utf8')), [['resource', 'file', 'line', 'status', 'code', 'message', 'notes', ...new Set([...COHORT_HEADER, ...STUDENT_HEADER])]]);

      // A new run is new requests under new keys: PUT finds every row unchanged.
      const rerun = await runSync(['--config', config], { cwd: dir, env });
      assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
      assert.deepEqual(summaryOf(rerun.stdout, 'cohorts'), { created: 0, updated: 0, unchanged: 2, rejected: 0 });
      assert.deepEqual(summaryOf(rerun.stdout, 'students'), { created: 0, updated: 0, unchanged: STUDENTS, rejected: 0 });
      // A run given an earlier run's id sends the same batches under the same keys: the service
      // answers each from its key (what that run did) and writes nothing.
      const before = await h.sql('select to_jsonb(s)::text as row from students s where university_id = $1 order by id', [university]);
      const runId = 'happy-run-1';
      const first = await runSync(['--config', config, '--run-id', runId], { cwd: dir, env });
      assert.equal(first.code, 0, first.stdout + first.stderr);
      // Changed behind the tool's back: a fresh run would answer it `updated`, a continued one replays.
      await h.sql(`update students set first_name = 'Changed' where university_id = $1 and email = 'happy.7@sync.example.edu'`, [university]);
      const changed = await h.sql('select to_jsonb(s)::text as row from students s where university_id = $1 order by id', [university]);
      const continued = await runSync(['--config', config, '--run-id', runId], { cwd: dir, env });
      assert.deepEqual(summaryOf(continued.stdout, 'students'), summaryOf(first.stdout, 'students'));
      // Each batch line says it was written before, which the counts alone did not.
      assert.match(first.stdout, /^students: batch 1\/3 done, /m);
      assert.match(continued.stdout, /^students: batch 1\/3 answered as written by the earlier run, /m);
      assert.doesNotMatch(continued.stdout, /^students: batch \d\/3 done/m);
      assert.equal(await h.sql<{ n: number }>(`select count(*)::int as n from idempotency_keys where key like 'pds-sync-${runId}-%'`).then((r) => r[0].n), 1 + Math.ceil(STUDENTS / LIMITS.batchRows));
      assert.deepEqual(await h.sql('select to_jsonb(s)::text as row from students s where university_id = $1 order by id', [university]), changed);
      assert.notDeepEqual(changed, before);
    });

    test('--dry-run: the summary says what would happen and nothing is written', async () => {
      const config = await dataSet('dry', 30);
      // The cohorts exist; the students do not.
      await writeFile(join(dir, 'dry-cohorts-only.json'), JSON.stringify({ url: serviceUrl, cohorts: { file: 'dry-cohorts.csv', columns: COLUMNS.cohorts } }));
      assert.equal((await runSync(['--config', 'dry-cohorts-only.json'], { cwd: dir, env })).code, 0);
      const before = await h.sql('select count(*)::int as n from students where university_id = $1', [university]);
      const history = await h.sql('select count(*)::int as n from alumni_flag_history');
      const run = await runSync(['--config', config, '--dry-run', '--batch-size', '7'], { cwd: dir, env });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /Dry run \(Prefer: tx=rollback\)/);
      assert.match(run.stdout, /Dry run: nothing was written\./);
      assert.deepEqual(summaryOf(run.stdout, 'cohorts'), { created: 0, updated: 0, unchanged: 2, rejected: 0 });
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 30, updated: 0, unchanged: 0, rejected: 0 });
      assert.deepEqual(await h.sql('select count(*)::int as n from students where university_id = $1', [university]), before);
      assert.deepEqual(await h.sql('select count(*)::int as n from alumni_flag_history'), history);
      assert.deepEqual(await studentsOf('dry'), []);
    });

    test('a dry run says which student rows fail only because their cohort is new in the same run', async () => {
      const config = await dataSet('fresh', 4);
      const run = await runSync(['--config', config, '--dry-run'], { cwd: dir, env });
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.deepEqual(summaryOf(run.stdout, 'cohorts'), { created: 2, updated: 0, unchanged: 0, rejected: 0 });
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 0, updated: 0, unchanged: 0, rejected: 4 });
      assert.match(run.stdout, /Of those, 4 student rows name a cohort this run would create/);
      assert.deepEqual(await h.sql(`select name from cohorts where university_id = $1 and name like 'fresh-%'`, [university]), []);
    });

    test('rejected rows end in the reject report with their input line, fields, code and message', async () => {
      const config = await dataSet('rej', 5, serviceUrl, [
        ['rej-bad', 'not-an-address', 'Bad', 'Email', 'rej-cs', 'no', ''],
        ['rej-multi', 'rej.multi@sync.example.edu', 'Two\nLines', 'Name', 'rej-cs', 'no', ''],
        ['rej-phone', 'rej.phone@sync.example.edu', 'Bad', 'Phone', 'rej-cs', 'no', '0123'],
        ['rej-nocohort', 'rej.nocohort@sync.example.edu', 'No', 'Cohort', 'rej-none', 'maybe', ''],
      ]);
      const run = await runSync(['--config', config], { cwd: dir, env });
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 5, updated: 0, unchanged: 0, rejected: 4 });
      assert.match(run.stdout, /Rejected rows: 4, listed in .*rej-rejects\.csv/);
      const report = parse(await readFile(join(dir, 'rej-rejects.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
      // Header on line 1, five generated rows on lines 2-6, the bad email on 7, the two-line name on 8-9.
      assert.ok(report.every((r) => r.status === 'rejected' && r.notes === ''));
      assert.deepEqual(report.map((r) => [r.resource, r.file, r.line, r.code, r.Email]), [
        ['students', join(dir, 'rej-students.csv'), '7', 'INVALID_EMAIL', 'not-an-address'],
        ['students', join(dir, 'rej-students.csv'), '8', 'INVALID_FIELD', 'rej.multi@sync.example.edu'],
        ['students', join(dir, 'rej-students.csv'), '10', 'INVALID_PHONE', 'rej.phone@sync.example.edu'],
        ['students', join(dir, 'rej-students.csv'), '11', 'INVALID_FIELD', 'rej.nocohort@sync.example.edu'],
      ]);
      const lines = (await readFile(join(dir, 'rej-students.csv'), 'utf8')).split('\n');
      assert.match(lines[6], /^rej-bad,not-an-address,/);
      assert.match(lines[7], /^rej-multi,/);
      assert.match(lines[9], /^rej-phone,/);
      assert.ok(report.every((r) => r.message.length > 0));
      assert.equal(report[1]['Given Name'], 'Two\nLines');
      assert.equal(report[2].Mobile, '0123');
      assert.equal(report[3]['Student Number'], 'rej-nocohort');
      assert.match(report[3].message, /is_alumni/);
    });

    test('rows applied with notes are in the report beside the rejected ones; an input column named like one of the report\'s keeps its own', async () => {
      await writeFile(join(dir, 'noted-cohorts.csv'), csv([COHORT_HEADER, ...cohortRows('noted')]));
      // The export's own `status` and `code` columns, not sent, stay in the report as they were read.
      await writeFile(join(dir, 'noted-students.csv'), csv([
        [...STUDENT_HEADER, 'status', 'code'],
        ['noted-1', 'noted.1@sync.example.edu', 'Agrees', 'Flag', 'noted-cs', 'no', '', 'enrolled', 'X1'],
        ['noted-2', 'noted.2@sync.example.edu', 'Early', 'Alumnus', 'noted-cs', 'yes', '', 'enrolled', 'X2'],
        ['noted-3', 'not-an-address', 'Bad', 'Email', 'noted-cs', 'no', '', 'left', 'X3'],
      ]));
      await writeFile(join(dir, 'noted.json'), JSON.stringify({
        url: serviceUrl, rejectReport: 'noted-report.csv',
        cohorts: { file: 'noted-cohorts.csv', columns: COLUMNS.cohorts },
        students: { file: 'noted-students.csv', columns: COLUMNS.students },
      }));
      const run = await runSync(['--config', 'noted.json'], { cwd: dir, env });
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.deepEqual(summaryOf(run.stdout, 'students'), { created: 2, updated: 0, unchanged: 0, rejected: 1 });
      assert.match(run.stdout, /Rejected rows: 1, listed in .*noted-report\.csv/);
      assert.match(run.stdout, /Rows applied with notes \(read them: the service did not apply all as sent\): 1, listed in .*noted-report\.csv/);
      const report = parse(await readFile(join(dir, 'noted-report.csv'), 'utf8'), { columns: true }) as Record<string, string>[];
      assert.deepEqual(report.map((r) => [r.line, r.status, r.code, r['status (input)'], r['code (input)'], r.Email]), [
        ['3', 'created', '', 'enrolled', 'X2', 'noted.2@sync.example.edu'],
        ['4', 'rejected', 'INVALID_EMAIL', 'left', 'X3', 'not-an-address'],
      ]);
      assert.match(report[0].notes, /^is_alumni was applied as sent \(true\), but with no graduation_date, the cohort end_date 2999-06-30 implies false/);
      assert.equal(report[1].notes, '');
    });

    test('503, 429, a dropped connection and a key still in use mid-run are retried after Retry-After: nothing lost, nothing doubled', async () => {
      const proxy = new Proxy(new URL(serviceUrl));
      const proxyUrl = await proxy.start();
      try {
        const COUNT = 2_000;
        const config = await dataSet('retry', COUNT, proxyUrl);
        // Request 1 is the cohorts; 2-5 the student batches. Batch 2 gets a 503, then a 429, then goes through;
        // batch 3 is written, but its connection drops before the answer comes back, so it is sent again: that
        // retry is told its key is still in use (as while a first attempt runs), and the next gets the stored answer.
        proxy.script = (n, _req, res) => {
          if (n === 3) {
            res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"code":"DATABASE_UNAVAILABLE","message":"The data store is not answering.","details":null,"hint":null}');
            return true;
          }
          if (n === 4) {
            res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"code":"RATE_LIMITED","message":"Too many writes.","details":null,"hint":null}');
            return true;
          }
          if (n === 7) {
            res.writeHead(409, { 'content-type': 'application/json', 'retry-after': '1' })
              .end('{"code":"IDEMPOTENCY_KEY_IN_USE","message":"A request with this Idempotency-Key is still being processed.","details":null,"hint":null}');
            return true;
          }
          return n === 6 ? 'lose-answer' : false;
        };
        const run = await runSync(['--config', config, '--retry-base-ms', '200'], { cwd: dir, env });
        assert.equal(run.code, 0, run.stdout + run.stderr);
        // The batch whose answer was lost was written once; its key's stored answer says "created" again.
        assert.deepEqual(summaryOf(run.stdout, 'students'), { created: COUNT, updated: 0, unchanged: 0, rejected: 0 });
        assert.match(run.stdout, /students: batch 2\/4: 503 DATABASE_UNAVAILABLE: The data store is not answering\.; attempt 2 of 6 in 1\.\d s/);
        assert.match(run.stdout, /students: batch 2\/4: 429 RATE_LIMITED: Too many writes\.; attempt 3 of 6 in 1\.\d s/);
        assert.match(run.stdout, /students: batch 3\/4: no answer \(\w+\); attempt 2 of 6/);
        assert.match(run.stdout, /students: batch 3\/4: 409 IDEMPOTENCY_KEY_IN_USE: .*; attempt 3 of 6 in 1\.\d s/);
        const seen = proxy.seen;
        assert.deepEqual(seen.map((s) => s.status), [200, 200, 503, 429, 200, 0, 409, 200, 200]);
        assert.deepEqual(seen.map((s) => s.replayed), [false, false, false, false, false, false, false, true, false]);
        assert.ok(seen[3].at - seen[2].at >= 1000, `the retry after a 503 came ${seen[3].at - seen[2].at} ms later`);
        assert.ok(seen[4].at - seen[3].at >= 1000, `the retry after a 429 came ${seen[4].at - seen[3].at} ms later`);
        assert.equal(new Set([seen[2].key, seen[3].key, seen[4].key]).size, 1, 'a retry repeats its Idempotency-Key');
        assert.equal(new Set([seen[5].key, seen[6].key, seen[7].key]).size, 1);
        assert.ok(seen[7].at - seen[6].at >= 1000, `the retry after a 409 came ${seen[7].at - seen[6].at} ms later`);
        assert.equal(new Set(seen.map((s) => s.key)).size, 5, 'each batch has its own key');
        const stored = await studentsOf('retry');
        assert.equal(stored.length, COUNT);
        assert.equal(new Set(stored.map((s) => s.external_id)).size, COUNT);
      } finally {
        await proxy.close();
      }
    });

    test('a service that keeps failing: bounded attempts, then exit 1 with the report and summary of what was done', async () => {
      const proxy = new Proxy(new URL(serviceUrl));
      const proxyUrl = await proxy.start();
      try {
        const config = await dataSet('down', 10, proxyUrl);
        proxy.script = (n, _req, res) => {
          if (n === 1) return false;
          res.writeHead(503, { 'retry-after': '0' }).end();
          return true;
        };
        const run = await runSync(['--config', config, '--max-attempts', '3', '--retry-base-ms', '10'], { cwd: dir, env });
        assert.equal(run.code, 1, run.stdout + run.stderr);
        assert.equal(proxy.seen.length, 4);
        assert.match(run.stderr, /PUT \/v1\/students failed after 3 attempts: 503 Service Unavailable/);
        assert.match(run.stderr, /To continue, run it again with --run-id [0-9a-f-]{36}/);
        assert.deepEqual(summaryOf(run.stdout, 'cohorts'), { created: 2, updated: 0, unchanged: 0, rejected: 0 });
        assert.equal(summaryOf(run.stdout, 'students')!.created, 0);
      } finally {
        await proxy.close();
      }
    });

    test('a refusal a retry cannot fix (a read token) stops at once', async () => {
      const config = await dataSet('refused', 3);
      const readToken = (await h.admin('POST', '/tokens', { university_id: university })).json.token;
      await writeFile(join(dir, 'read-token'), `${readToken}\n`);
      const run = await runSync(['--config', config, '--token-file', 'read-token'], { cwd: dir, env: { PDS_TOKEN: undefined } });
      assert.equal(run.code, 1);
      assert.match(run.stderr, /PUT \/v1\/cohorts was refused: 403 WRITE_NOT_ENABLED/);
      assert.deepEqual(await h.sql(`select name from cohorts where university_id = $1 and name like 'refused-%'`, [university]), []);
    });

    test('--mode patch needs only the key column; an empty cell is left out unless --empty-as-null', async () => {
      await writeFile(join(dir, 'patch.csv'), csv([['Email', 'Mobile'], ['happy.1@sync.example.edu', '+447700900001'], ['happy.3@sync.example.edu', '+447700900003']]));
      const args = ['--url', serviceUrl, '--mode', 'patch', '--students', 'patch.csv', '--map', 'students.email=Email', '--map', 'students.phone=Mobile'];
      assert.equal((await runSync(args, { cwd: dir, env })).code, 0);
      await writeFile(join(dir, 'patch.csv'), csv([['Email', 'Mobile'], ['happy.1@sync.example.edu', ''], ['happy.3@sync.example.edu', '']]));
      const untouched = await runSync(args, { cwd: dir, env });
      assert.deepEqual(summaryOf(untouched.stdout, 'students'), { created: 0, updated: 0, unchanged: 2, rejected: 0 });
      const cleared = await runSync([...args, '--empty-as-null'], { cwd: dir, env });
      assert.deepEqual(summaryOf(cleared.stdout, 'students'), { created: 0, updated: 2, unchanged: 0, rejected: 0 });
      assert.deepEqual(await h.sql(`select phone from students where email in ('happy.1@sync.example.edu', 'happy.3@sync.example.edu')`), [{ phone: null }, { phone: null }]);
    });

    test('on a terminal: a progress bar with rows per second', async () => {
      const config = await dataSet('tty', 600);
      const command = [process.execPath, BIN, '--config', config, '--batch-size', '100'].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
      // script(1) runs the command on a pseudo-terminal, so its standard output is a TTY.
      const run = await new Promise<Run>((resolve) => {
        execFile('script', ['-qec', command, '/dev/null'], { cwd: dir, env: { ...process.env, ...env, TERM: 'xterm' } }, (error, stdout, stderr) =>
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
      });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /students +\|[\u2588\u2591]{40}\| 600\/600 rows \| \d+ rows\/s/);
      assert.doesNotMatch(run.stdout, /batch \d+\/\d+ done/, 'no plain lines on a terminal');
      assert.deepEqual(summaryOf(run.stdout.replaceAll('\r', ''), 'students'), { created: 600, updated: 0, unchanged: 0, rejected: 0 });
    });
  });
}
