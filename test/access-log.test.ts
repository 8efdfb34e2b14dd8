/**
 * One JSON access-log line per request (and no other line for it): request id, method, route
 * template, status, duration, body bytes, token id, university or consortium, the error code of
 * an error answer and a write's counts. Nothing the caller sent as data reaches the log.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Response, Harness } from './support/harness.ts';
import { parseExposition, valueOf } from './support/prometheus.ts';
import { eventually } from './support/eventually.ts';

const PRIVATE_EMAIL = 'ada.lovelace.private@example.edu';
const PRIVATE_NAME = 'Augusta-Lovelace';

describe('access log', () => {
  let h: Harness;
  const lines: string[] = [];
  let university: { id: string; read: { id: string; token: string }; write: { id: string; token: string } };
  let consortium: { id: string; token: { id: string; token: string } };

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 3, settings: { logLevel: 'info', logStream: { write: (line) => void lines.push(line) } } });
    const issue = async (grant: Record<string, unknown>) => (await h.admin('POST', '/tokens', grant)).json as { id: string; token: string };
    const demo = h.demo!;
    university = {
      id: demo.universities[0].id,
      read: await issue({ university_id: demo.universities[0].id }),
      write: await issue({ university_id: demo.universities[0].id, can_write: true }),
    };
    consortium = { id: demo.consortium.id, token: await issue({ consortium_id: demo.consortium.id }) };
  });
  after(() => h.close());

  /** The log lines `send` caused, once its answer is logged. */
  async function logged(send: () => Promise<Response>): Promise<{ response: Response; entries: Record<string, any>[]; text: string }> {
    lines.length = 0;
    const response = await send();
    const text = lines.join('');
    return { response, entries: lines.map((line) => JSON.parse(line)), text };
  }

  /** Exactly one line, the access line, for the request. */
  function accessLine(response: Response, entries: Record<string, any>[]): Record<string, any> {
    assert.equal(entries.length, 1, `one line per request, got ${JSON.stringify(entries)}`);
    const [entry] = entries;
    assert.equal(entry.msg, 'request completed');
    assert.equal(entry.level, 30);
    assert.equal(entry.reqId, response.headers['x-request-id']);
    assert.equal(entry.status, response.status);
    assert.equal(typeof entry.duration_ms, 'number');
    assert.ok(entry.duration_ms >= 0);
    assert.equal(entry.bytes, Buffer.byteLength(response.body));
    for (const leak of ['url', 'req', 'res', 'query', 'headers']) assert.ok(!(leak in entry), `${leak} in the access line`);
    return entry;
  }

  test('a read: route template, token, university, bytes of a streamed page', async () => {
    const { response, entries } = await logged(() => h.get(`/v1/students?select=id,email&email=neq.${PRIVATE_EMAIL}`, university.read.token));
    assert.equal(response.status, 200);
    const entry = accessLine(response, entries);
    assert.ok(entry.bytes > 2, 'the page has rows');
    const { method, route, status, token_id, university_id, consortium_id, error_code } = entry;
    assert.deepEqual({ method, route, status, token_id, university_id, consortium_id, error_code }, {
      method: 'GET', route: '/v1/students', status: 200, token_id: university.read.id, university_id: university.id, consortium_id: null, error_code: null,
    });
    assert.ok(!('batch' in entry));
  });

  test('a consortium read names the consortium, a HEAD sends no body bytes', async () => {
    const { response, entries } = await logged(() => h.request({ method: 'HEAD', url: '/v1/campuses?limit=5', headers: { authorization: `Bearer ${consortium.token.token}` } }));
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.method, entry.route, entry.bytes], ['HEAD', '/v1/campuses', 0]);
    assert.deepEqual([entry.token_id, entry.consortium_id, entry.university_id], [consortium.token.id, consortium.id, null]);
  });

  test('a write: the batch counts by outcome, and no row value', async () => {
    const [{ name: cohort }] = await h.sql<{ name: string }>('select name from cohorts where university_id = $1 limit 1', [university.id]);
    const row = { email: PRIVATE_EMAIL, first_name: PRIVATE_NAME, last_name: PRIVATE_NAME, cohort_name: cohort, is_alumni: false };
    const { response, entries, text } = await logged(() => h.request({
      method: 'PUT', url: '/v1/students', payload: { students: [row, { ...row, email: `bad-${PRIVATE_NAME}` }] },
      headers: { authorization: `Bearer ${university.write.token}`, 'content-type': 'application/json' },
    }));
    assert.deepEqual(response.json.counts, { created: 1, updated: 0, unchanged: 0, rejected: 1 });
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.method, entry.route, entry.token_id, entry.university_id], ['PUT', '/v1/students', university.write.id, university.id]);
    assert.deepEqual(entry.batch, { resource: 'students', ...response.json.counts });
    for (const value of [PRIVATE_EMAIL, PRIVATE_NAME, cohort]) assert.ok(!text.includes(value), `${value} reached the log`);
  });

  test('a write whose client went away before the answer: its committed batch is logged, cut off, and counted', async () => {
    const [{ name: cohort }] = await h.sql<{ name: string }>('select name from cohorts where university_id = $1 limit 1', [university.id]);
    const createdCount = async () => valueOf(parseExposition((await h.get('/metrics', null)).body), 'pds_batch_rows_total', { resource: 'students', outcome: 'created' });
    const before = await createdCount();
    // The batch's transaction waits until the client has gone.
    let clientGone!: () => void;
    const gone = new Promise<void>((resolve) => { clientGone = resolve; });
    const transaction = h.store.transaction.bind(h.store);
    h.store.transaction = async (fn, options) => {
      await gone;
      return transaction(fn, options);
    };
    try {
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      lines.length = 0;
      const body = JSON.stringify({ students: [{ email: 'gone.client@example.edu', first_name: 'Gone', last_name: 'Client', cohort_name: cohort, is_alumni: false }] });
      const sent = request({ port, method: 'PUT', path: '/v1/students', headers: {
        authorization: `Bearer ${university.write.token}`, 'content-type': 'application/json', 'x-request-id': 'gone-client-1',
      } });
      sent.on('error', () => {});
      sent.end(body);
      // The request reaches its transaction, which waits; then the client goes.
      await new Promise((resolve) => setTimeout(resolve, 150));
      sent.destroy();
      await new Promise((resolve) => setTimeout(resolve, 50));
      clientGone();
      await eventually(() => lines.some((line) => JSON.parse(line).reqId === 'gone-client-1'), 3_000, 'the access line');
      const entry = JSON.parse(lines.find((line) => JSON.parse(line).reqId === 'gone-client-1')!);
      assert.deepEqual([entry.msg, entry.route, entry.status, entry.cut_off], ['request completed', '/v1/students', 200, true]);
      assert.deepEqual(entry.batch, { resource: 'students', created: 1, updated: 0, unchanged: 0, rejected: 0 });
      assert.equal((await h.sql('select 1 from students where email = $1', ['gone.client@example.edu'])).length, 1);
      assert.equal(await createdCount(), before + 1);
    } finally {
      h.store.transaction = transaction;
      clientGone();
    }
  });

  test('a 401: the error code, no token', async () => {
    const forged = 'pds_forged-access-log-token';
    const { response, entries, text } = await logged(() => h.get('/v1/students', forged));
    assert.equal(response.status, 401);
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.error_code, entry.token_id, entry.university_id, entry.consortium_id], ['UNAUTHORIZED', null, null, null]);
    assert.ok(!text.includes(forged));
  });

  test('a query-language 4xx: the code, and nothing of the query string', async () => {
    const { response, entries, text } = await logged(() => h.get(`/v1/students?email=zz.${PRIVATE_EMAIL}&or=(last_name.eq.${PRIVATE_NAME}`, university.read.token));
    assert.equal(response.status, 400);
    assert.ok(response.body.includes(PRIVATE_EMAIL) || response.body.includes(PRIVATE_NAME), 'the answer itself quotes the query');
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.route, entry.error_code, entry.token_id], ['/v1/students', 'PGRST100', university.read.id]);
    for (const value of [PRIVATE_EMAIL, PRIVATE_NAME, 'zz.']) assert.ok(!text.includes(value), `${value} reached the log`);
  });

  test('a 404 logs the unmatched route, not the path', async () => {
    const { response, entries, text } = await logged(() => h.get(`/students/${PRIVATE_EMAIL}`, null));
    assert.equal(response.status, 404);
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.route, entry.error_code], ['unmatched', 'NOT_FOUND']);
    assert.ok(!text.includes(PRIVATE_EMAIL));
  });

  test('answers Fastify gives before routing (bad percent-encoding, an over-long segment) are logged and counted too', async () => {
    const cases = [
      { url: '/v1/%E0%A4%A', status: 400, code: 'BAD_REQUEST' },
      { url: `/admin/v1/tokens/${'a'.repeat(101)}`, status: 414, code: 'URI_TOO_LONG' },
    ];
    for (const { url, status, code } of cases) {
      const countOf = async () => valueOf(parseExposition((await h.get('/metrics', null)).body), 'pds_http_requests_total',
        { route: 'unmatched', method: 'GET', status: String(status) });
      const before = await countOf();
      const { response, entries } = await logged(() => h.get(url, null));
      assert.equal(response.status, status, response.body);
      assert.equal(response.json.code, code);
      const entry = accessLine(response, entries);
      assert.deepEqual([entry.method, entry.route, entry.error_code], ['GET', 'unmatched', code]);
      assert.equal(await countOf(), before + 1, `${url} is counted once`);
    }
  });

  test('an operator call logs its route template, not its ids', async () => {
    const { response, entries } = await logged(() => h.admin('DELETE', `/tokens/${university.read.id}`));
    assert.equal(response.status, 204);
    const entry = accessLine(response, entries);
    assert.deepEqual([entry.route, entry.token_id, entry.error_code], ['/admin/v1/tokens/:id', null, null]);
  });
});
