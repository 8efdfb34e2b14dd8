/**
 * GET /metrics: after known traffic each counter moved by exactly what was sent (compared
 * before and after, on each backend), the pool gauges show a held store, label values carry
 * nothing the caller typed, and PDS_METRICS_KEY closes the endpoint.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { type Response, Harness, backends } from './support/harness.ts';
import { type Sample, parseExposition, valueOf } from './support/prometheus.ts';

const PRIVATE_EMAIL = 'grace.hopper.metrics@example.edu';

test('the exposition helper reads labelled histogram series apart', async () => {
  const registry = new Registry();
  const histogram = new Histogram({ name: 't_seconds', help: 'h', labelNames: ['route'], registers: [registry] });
  const counter = new Counter({ name: 't_total', help: 'c', labelNames: ['code'], registers: [registry] });
  histogram.observe({ route: '/a' }, 0.2);
  histogram.observe({ route: '/b' }, 0.3);
  histogram.observe({ route: '/b' }, 0.4);
  counter.inc({ code: 'say "hi"\\' }, 5);
  const samples = parseExposition(await registry.metrics());
  assert.equal(valueOf(samples, 't_seconds_count', { route: '/a' }), 1);
  assert.equal(valueOf(samples, 't_seconds_count', { route: '/b' }), 2);
  assert.equal(valueOf(samples, 't_seconds_bucket', { route: '/b', le: '0.25' }), 0);
  assert.equal(valueOf(samples, 't_total', { code: 'say "hi"\\' }), 5);
});

for (const backend of backends()) {
  describe(`metrics on ${backend}`, () => {
    let h: Harness;
    const READ_LIMIT = 50;
    const WRITE_LIMIT = 3;
    const AUTH_FAILURE_LIMIT = 2;
    before(async () => {
      h = await Harness.start(backend, {
        demoStudents: 5,
        settings: { readLimitPerMin: READ_LIMIT, writeLimitPerMin: WRITE_LIMIT, authFailureLimitPerMin: AUTH_FAILURE_LIMIT },
      });
    });
    after(() => h.close());

    async function scrape(): Promise<{ response: Response; samples: Sample[] }> {
      const response = await h.request({ method: 'GET', url: '/metrics' });
      assert.equal(response.status, 200);
      assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      return { response, samples: parseExposition(response.body) };
    }

    /** How much each series moved between two scrapes. */
    const moved = (before: Sample[], after: Sample[]) => (name: string, labels: Record<string, string> = {}) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);

    test('the README\'s table names every metric the page has, and no other (prom-client\'s process metrics as one line)', async () => {
      const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
      const documented = [...readme.matchAll(/^\| `(pds_[a-z_]+)` \|/gm)].map(([, name]) => name).sort();
      const { response } = await scrape();
      const served = [...new Set([...response.body.matchAll(/^# TYPE (pds_[a-z_]+) /gm)].map(([, name]) => name))]
        .filter((name) => !/^pds_(process|nodejs)_/.test(name)).sort();
      assert.deepEqual(documented, served);
      assert.match(readme, /^\| `pds_process_\*`, `pds_nodejs_\*` \|/m);
    });

    test('counters move by exactly the traffic sent', async () => {
      const university = h.demo!.universities[0];
      const [{ name: cohort }] = await h.sql<{ name: string }>('select name from cohorts where university_id = $1 limit 1', [university.id]);
      const write = (rows: unknown[]) => h.request({
        method: 'PUT', url: '/v1/students', payload: { students: rows },
        headers: { authorization: `Bearer ${university.write_token}`, 'content-type': 'application/json' },
      });
      const student = { email: PRIVATE_EMAIL, first_name: 'Grace', last_name: 'Hopper', cohort_name: cohort, is_alumni: false };

      const { samples: first } = await scrape();
      const READS = 4;
      for (let i = 0; i < READS; i++) assert.equal((await h.get('/v1/campuses', university.read_token)).status, 200);
      const batch = await write([student, { ...student, email: 'not-an-address' }, { ...student, email: 'x.metrics@example.edu', cohort_name: 'no such cohort' }]);
      assert.deepEqual(batch.json.counts, { created: 1, updated: 0, unchanged: 0, rejected: 2 });
      assert.deepEqual((await write([student])).json.counts, { created: 0, updated: 0, unchanged: 1, rejected: 0 });
      assert.equal((await write([student])).status, 200);
      assert.equal((await write([student])).json.code, 'RATE_LIMITED');
      assert.equal((await h.get(`/nowhere/${PRIVATE_EMAIL}?email=${PRIVATE_EMAIL}`, null)).status, 404);
      // 405s are counted under the path's own template, whichever route refused them.
      for (const url of ['/v1/changes', '/v1/me', '/v1/campuses']) {
        assert.equal((await h.request({ method: 'POST', url, headers: { authorization: `Bearer ${university.read_token}` } })).status, 405, url);
      }
      assert.equal((await h.request({ method: 'DELETE', url: '/healthz' })).status, 405);
      assert.equal((await h.request({ method: 'POST', url: '/v1/changes' })).status, 401);
      assert.equal((await h.get('/v1/students?id=eq.not-a-uuid', university.read_token)).json.code, '22P02');
      const elsewhere = { remoteAddress: '10.1.2.3' };
      for (let i = 0; i < AUTH_FAILURE_LIMIT; i++) {
        assert.equal((await h.request({ method: 'GET', url: '/v1/campuses', headers: { authorization: 'Bearer pds_unknown' }, ...elsewhere })).status, 401);
      }
      const refused = await h.request({ method: 'GET', url: '/v1/campuses', headers: { authorization: 'Bearer pds_unknown' }, ...elsewhere });
      assert.equal(refused.json.code, 'RATE_LIMITED');
      const { response, samples: second } = await scrape();
      const delta = moved(first, second);

      assert.equal(delta('pds_http_requests_total', { route: '/v1/campuses', method: 'GET', status: '200' }), READS);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/campuses', method: 'GET', status: '401' }), AUTH_FAILURE_LIMIT);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/campuses', method: 'GET', status: '429' }), 1);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/students', method: 'PUT', status: '200' }), 3);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/students', method: 'PUT', status: '429' }), 1);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/students', method: 'GET', status: '400' }), 1);
      assert.equal(delta('pds_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }), 1);
      for (const route of ['/v1/changes', '/v1/me', '/v1/campuses']) assert.equal(delta('pds_http_requests_total', { route, method: 'POST', status: '405' }), 1, route);
      assert.equal(delta('pds_http_requests_total', { route: '/healthz', method: 'DELETE', status: '405' }), 1);
      assert.equal(delta('pds_http_requests_total', { route: '/v1/changes', method: 'POST', status: '401' }), 1);
      // The first scrape is counted once it is answered, so it shows in the second.
      assert.equal(delta('pds_http_requests_total', { route: '/metrics', method: 'GET', status: '200' }), 1);
      assert.equal(delta('pds_http_request_duration_seconds_count', { route: '/v1/campuses', method: 'GET' }), READS + AUTH_FAILURE_LIMIT + 1);
      assert.equal(delta('pds_http_request_duration_seconds_count', { route: '/v1/students', method: 'PUT' }), 4);

      assert.equal(delta('pds_batch_rows_total', { resource: 'students', outcome: 'created' }), 1);
      assert.equal(delta('pds_batch_rows_total', { resource: 'students', outcome: 'unchanged' }), 2);
      assert.equal(delta('pds_batch_rows_total', { resource: 'students', outcome: 'updated' }), 0);
      assert.equal(delta('pds_batch_rows_total', { resource: 'students', outcome: 'rejected' }), 2);
      assert.equal(delta('pds_batch_rejected_rows_total', { resource: 'students', code: 'INVALID_EMAIL' }), 1);
      assert.equal(delta('pds_batch_rejected_rows_total', { resource: 'students', code: 'COHORT_NOT_FOUND' }), 1);
      assert.equal(delta('pds_batch_rows_total', { resource: 'cohorts', outcome: 'created' }), 0);

      assert.equal(delta('pds_rate_limit_rejections_total', { kind: 'write' }), 1);
      assert.equal(delta('pds_rate_limit_rejections_total', { kind: 'auth_failure' }), 1);
      assert.equal(delta('pds_rate_limit_rejections_total', { kind: 'read' }), 0);
      assert.equal(delta('pds_store_errors_total', { class: '22' }), 1);

      // Every known series is exposed from the start, at zero until it moves.
      assert.ok(first.some((s) => s.name === 'pds_batch_rejected_rows_total' && s.labels.code === 'EMAIL_BELONGS_TO_NON_STUDENT'));
      assert.ok(first.some((s) => s.name === 'pds_rate_limit_rejections_total' && s.labels.kind === 'read'));
      // Process metrics, on this app's registry.
      assert.ok(valueOf(second, 'pds_process_cpu_user_seconds_total') > 0);
      assert.ok(second.some((s) => s.name === 'pds_nodejs_eventloop_lag_seconds'));
      // Nothing the caller typed became a label value.
      for (const typed of [PRIVATE_EMAIL, 'not-an-address', 'not-a-uuid', 'nowhere', 'pds_unknown']) {
        assert.ok(!response.body.includes(typed), `${typed} appears in the metrics`);
      }
    });

    test('the read limit counts as kind read', async () => {
      const { samples: first } = await scrape();
      const elsewhere = { remoteAddress: '10.9.8.7', headers: { authorization: `Bearer ${h.demo!.consortium.read_token}` } };
      let status = 200;
      for (let i = 0; i <= READ_LIMIT && status === 200; i++) status = (await h.request({ method: 'GET', url: '/v1/campuses?select=id', ...elsewhere })).status;
      assert.equal(status, 429);
      const { samples: second } = await scrape();
      assert.equal(moved(first, second)('pds_rate_limit_rejections_total', { kind: 'read' }), 1);
    });

    test('the pool gauges show sessions held and requests waiting at scrape time', async () => {
      // PGlite has one session; the harness opens PostgreSQL pools of 10 connections.
      const capacity = backend === 'pglite' ? 1 : 10;
      // A streamed page commits just after its last byte went out.
      for (let i = 0; i < 100 && h.store.poolStats().inUse > 0; i++) await new Promise((r) => setTimeout(r, 10));
      const idle = (await scrape()).samples;
      assert.equal(valueOf(idle, 'pds_store_pool_in_use'), 0);
      assert.equal(valueOf(idle, 'pds_store_pool_waiting'), 0);
      assert.equal(valueOf(idle, 'pds_store_pool_shared'), 0);

      let release!: () => void;
      const released = new Promise<void>((resolve) => { release = resolve; });
      const holders = Array.from({ length: capacity }, () => {
        let started!: () => void;
        const running = new Promise<void>((resolve) => { started = resolve; });
        const done = h.store.transaction(async (tx) => {
          await tx.query('select 1');
          started();
          await released;
        });
        return { running, done };
      });
      await Promise.all(holders.map((holder) => holder.running));
      const queued = h.store.query('select 1');
      try {
        const busy = (await scrape()).samples;
        assert.equal(valueOf(busy, 'pds_store_pool_in_use'), capacity);
        assert.equal(valueOf(busy, 'pds_store_pool_waiting'), 1);
      } finally {
        release();
        await Promise.all([...holders.map((holder) => holder.done), queued]);
      }
    });

    if (backend === 'postgres') {
      test('the shared gauge counts the reads sent behind another on a reader session, every session being in use', async () => {
        const reader = h.db.partnerReader({ universityIds: [h.demo!.universities[0].id] });
        const read = (text: string) => h.store.readAsReader(reader, 'objects', text, []);
        // Ten reader sessions holding this scope, each then busy with a read of it, then one more read of it.
        await Promise.all(Array.from({ length: 10 }, () => read('select 1')));
        const slow = Array.from({ length: 10 }, () => read('select pg_sleep(0.5)'));
        await new Promise((r) => setTimeout(r, 150));
        const behind = read('select 1');
        try {
          assert.equal(valueOf((await scrape()).samples, 'pds_store_pool_shared'), 1);
        } finally {
          await Promise.all([...slow, behind]);
        }
        assert.equal(valueOf((await scrape()).samples, 'pds_store_pool_shared'), 0);
      });
    }
  });
}

describe('PDS_METRICS_KEY', () => {
  const KEY = 'metrics-scraper-key';
  let h: Harness;
  before(async () => {
    h = await Harness.start('pglite', { settings: { metricsKey: KEY, authFailureLimitPerMin: 100 } });
  });
  after(() => h.close());

  test('without the key the answer is 401 with the documented body; with it, the metrics', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-key' }, { authorization: KEY }]) {
      const refused = await h.request({ method: 'GET', url: '/metrics', headers });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers['www-authenticate'], 'Bearer');
      assert.deepEqual(refused.json, {
        code: 'UNAUTHORIZED', message: 'GET /metrics needs Authorization: Bearer $PDS_METRICS_KEY.', details: null, hint: null,
      });
    }
    const allowed = await h.request({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(allowed.status, 200);
    const samples = parseExposition(allowed.body);
    assert.equal(valueOf(samples, 'pds_http_requests_total', { route: '/metrics', method: 'GET', status: '401' }), 3);
  });
});
