/**
 * CORS on /v1 as PostgREST does it by default: any origin, no credentials, the preflight
 * answered 204 without a token, the client's request headers allowed and the paging and
 * rate-limit headers exposed, on errors too; PDS_CORS_ORIGINS narrows it to exact origins.
 * The operator API is not for browsers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readConfig } from '../src/config.ts';
import { ADMIN_KEY, Harness, type Response } from './support/harness.ts';

const ORIGIN = 'https://partner-app.example';

const listOf = (header: unknown) => String(header ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);

function assertReadableByBrowser(response: Response, origin = '*'): void {
  assert.equal(response.headers['access-control-allow-origin'], origin, `${response.status} ${response.body}`);
  assert.equal(response.headers['access-control-allow-credentials'], undefined);
  const exposed = listOf(response.headers['access-control-expose-headers']);
  for (const header of ['content-range', 'preference-applied', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'x-request-id', 'allow', 'idempotent-replayed']) {
    assert.ok(exposed.includes(header), `${header} is exposed: ${exposed}`);
  }
}

const preflight = (h: Harness, url: string, origin: string, method = 'PUT', requestHeaders = 'authorization, content-type, prefer, range, accept, idempotency-key') =>
  h.request({ method: 'OPTIONS', url, headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': requestHeaders } });

describe('CORS, any origin', () => {
  let h: Harness;
  let token: string;

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 5, settings: { readLimitPerMin: 3 } });
    token = h.demo!.universities[0].read_token;
  });
  after(() => h.close());

  test('a read from a browser origin: Allow-Origin *, no credentials, Content-Range and the rate-limit headers exposed', async () => {
    const response = await h.get('/v1/cohorts?select=id', token, { origin: ORIGIN, prefer: 'count=exact' });
    assert.equal(response.status, 200);
    assertReadableByBrowser(response);
    assert.ok(response.headers['content-range']);
    assert.ok(response.headers['ratelimit-remaining']);
  });

  test('the preflight is answered 204 without a token, on every /v1 path', async () => {
    for (const url of ['/v1/students', '/v1/students?select=id', '/v1/campuses', '/v1/openapi.json', '/v1/nope', '/v1/a/b']) {
      const response = await preflight(h, url, ORIGIN);
      assert.equal(response.status, 204, `${url}: ${response.body}`);
      assert.equal(response.body, '');
      assert.equal(response.headers['access-control-allow-origin'], '*');
      assert.equal(response.headers['access-control-allow-credentials'], undefined);
      const methods = listOf(response.headers['access-control-allow-methods']);
      for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete']) assert.ok(methods.includes(method), `${method} in ${methods}`);
      const allowed = listOf(response.headers['access-control-allow-headers']);
      for (const header of ['authorization', 'prefer', 'range', 'content-type', 'accept', 'idempotency-key']) assert.ok(allowed.includes(header), `${header} in ${allowed}`);
      assert.equal(response.headers['access-control-max-age'], '86400');
    }
  });

  test('the preflight allows the request headers it is asked for, whatever the client adds (Vary says so)', async () => {
    const asked = 'authorization, x-client-info, apikey, x-retry-count, accept-profile, content-profile';
    const response = await preflight(h, '/v1/cohorts', ORIGIN, 'GET', asked);
    assert.equal(response.status, 204);
    assert.deepEqual(listOf(response.headers['access-control-allow-headers']), listOf(asked));
    assert.ok(listOf(response.headers.vary).includes('access-control-request-headers'));
  });

  test('errors carry the CORS headers too: 401, 404, 405, 406 and 429', async () => {
    const unauthorized = await h.get('/v1/students', null, { origin: ORIGIN });
    assert.equal(unauthorized.status, 401);
    assertReadableByBrowser(unauthorized);
    const unknown = await h.get('/v1/nope', token, { origin: ORIGIN });
    assert.equal(unknown.status, 404);
    assertReadableByBrowser(unknown);
    const refused = await h.request({ method: 'DELETE', url: '/v1/students', headers: { origin: ORIGIN, authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    assert.equal(refused.status, 405);
    assertReadableByBrowser(refused);
    const unacceptable = await h.get('/v1/cohorts', token, { origin: ORIGIN, accept: 'application/xml' });
    assert.equal(unacceptable.status, 406);
    assertReadableByBrowser(unacceptable);
    let limited: Response | undefined;
    for (let i = 0; i < 5 && limited === undefined; i++) {
      const response = await h.get('/v1/cohorts?select=id', token, { origin: ORIGIN });
      if (response.status === 429) limited = response;
    }
    assert.ok(limited, 'the read limit of 3 a minute was reached');
    assertReadableByBrowser(limited);
    assert.ok(limited.headers['retry-after']);
  });

  test('without an Origin nothing changes for a server-side client', async () => {
    const response = await h.request({ method: 'OPTIONS', url: '/v1/students', headers: { 'access-control-request-method': 'GET' } });
    assert.equal(response.status, 401);
  });

  test('a request without Origin is not a browser\'s cross-origin call: no CORS headers, as PostgREST answers it; Vary: Origin stays', async () => {
    for (const response of [await h.get('/v1/cohorts?select=id', token), await h.get('/v1/nope', token), await h.get('/v1/students', null)]) {
      assert.equal(response.headers['access-control-allow-origin'], undefined, `${response.status} ${response.body}`);
      assert.equal(response.headers['access-control-expose-headers'], undefined);
      assert.ok(listOf(response.headers.vary).includes('origin'), String(response.headers.vary));
    }
  });

  test('the operator API and the health checks are not for browsers: no CORS headers, no preflight', async () => {
    const [student] = await h.sql<{ id: string }>('select id from students limit 1');
    const read = await h.request({ method: 'GET', url: `/admin/v1/students/${student.id}/alumni-history`, headers: { origin: ORIGIN, authorization: `Bearer ${ADMIN_KEY}` } });
    assert.equal(read.status, 200);
    assert.equal(read.headers['access-control-allow-origin'], undefined);
    const health = await h.request({ method: 'GET', url: '/healthz', headers: { origin: ORIGIN } });
    assert.equal(health.headers['access-control-allow-origin'], undefined);
    const operatorPreflight = await preflight(h, '/admin/v1/tokens', ORIGIN, 'POST');
    assert.notEqual(operatorPreflight.status, 204);
    assert.equal(operatorPreflight.headers['access-control-allow-origin'], undefined);
  });
});

describe('CORS restricted by PDS_CORS_ORIGINS', () => {
  const ALLOWED = ['https://allowed.example', 'http://localhost:5173'];
  let h: Harness;
  let token: string;

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 5, settings: { corsOrigins: readConfig({ PDS_CORS_ORIGINS: ALLOWED.join(' , ') }).corsOrigins } });
    token = h.demo!.universities[0].read_token;
  });
  after(() => h.close());

  test('a listed origin is echoed, with Vary: Origin', async () => {
    for (const origin of ALLOWED) {
      const response = await h.get('/v1/cohorts?select=id', token, { origin });
      assertReadableByBrowser(response, origin);
      assert.ok(listOf(response.headers.vary).includes('origin'));
      const answered = await preflight(h, '/v1/students', origin);
      assert.equal(answered.status, 204);
      assert.equal(answered.headers['access-control-allow-origin'], origin);
    }
  });

  test('an origin not listed gets no Allow-Origin, on reads, errors and preflights', async () => {
    for (const origin of ['https://evil.example', 'https://allowed.example.evil.example', 'http://allowed.example']) {
      const read = await h.get('/v1/cohorts?select=id', token, { origin });
      assert.equal(read.status, 200);
      assert.equal(read.headers['access-control-allow-origin'], undefined, origin);
      const error = await h.get('/v1/cohorts', null, { origin });
      assert.equal(error.headers['access-control-allow-origin'], undefined, origin);
      const refused = await preflight(h, '/v1/students', origin);
      assert.equal(refused.headers['access-control-allow-origin'], undefined, origin);
    }
  });
});

test('PDS_CORS_ORIGINS: unset is any origin; a list of exact origins; anything that is not an origin refuses to start', () => {
  assert.equal(readConfig({}).corsOrigins, undefined);
  assert.equal(readConfig({ PDS_CORS_ORIGINS: '' }).corsOrigins, undefined);
  assert.deepEqual(readConfig({ PDS_CORS_ORIGINS: 'https://a.example,http://127.0.0.1:3000' }).corsOrigins, ['https://a.example', 'http://127.0.0.1:3000']);
  for (const bad of ['https://a.example/', 'a.example', 'https://a.example/app', '*']) {
    assert.throws(() => readConfig({ PDS_CORS_ORIGINS: bad }), /PDS_CORS_ORIGINS/, bad);
  }
});
