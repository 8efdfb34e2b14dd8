/**
 * The method is refused before the body is read: a method a path does not serve is 405 with
 * the Allow its routes give, and a path no route serves is 404 (PGRST205 or PGRST125 under /v1,
 * as PostgREST answers), whatever body and Content-Type come with it. On the /v1 paths behind a token the token is checked first (401), as PostgREST
 * checks its JWT before it reads the request; paths that need none refuse at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LIMITS } from '../src/limits.ts';
import { resources } from '../src/resources/registry.ts';
import { WRITE_SHAPES } from '../src/resources/write-shapes.ts';
import { Harness } from './support/harness.ts';

/** Bodies that would each be refused (400, 413, 415) if they were read. */
const BODIES: { name: string; headers: Record<string, string>; payload?: string | Buffer }[] = [
  { name: 'no body with Content-Type: application/json (postgrest-js .delete())', headers: { 'content-type': 'application/json' } },
  { name: 'broken JSON', headers: { 'content-type': 'application/json' }, payload: '{"students": [' },
  { name: 'an XML body', headers: { 'content-type': 'application/xml' }, payload: '<students/>' },
  { name: 'a body over the size limit', headers: { 'content-type': 'application/json' }, payload: Buffer.alloc(LIMITS.bodyBytes + 1, 32) },
];

describe('methods before bodies', () => {
  let h: Harness;
  let token: string;

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 5 });
    token = h.demo!.universities[0].write_token;
  });
  after(() => h.close());

  const send = (method: string, url: string, headers: Record<string, string>, payload?: string | Buffer, withToken = true) =>
    h.request({ method: method as never, url, headers: { ...headers, ...(withToken ? { authorization: `Bearer ${token}` } : {}) }, payload });

  for (const body of BODIES) {
    test(`DELETE /v1/students with ${body.name}: 405, Allow: GET, HEAD, POST, PUT, PATCH`, async () => {
      const response = await send('DELETE', '/v1/students', body.headers, body.payload);
      assert.equal(response.status, 405, response.body);
      assert.equal(response.headers.allow, 'GET, HEAD, POST, PUT, PATCH');
      assert.deepEqual(response.json, {
        code: 'METHOD_NOT_ALLOWED', message: 'DELETE is not allowed here.', details: null, hint: 'Allowed: GET, HEAD, POST, PUT, PATCH.',
      });
    });
  }

  test('every read-only resource: writes with any body are 405, Allow: GET, HEAD', async () => {
    const readOnly = resources.filter((r) => !Object.hasOwn(WRITE_SHAPES, r.name));
    assert.ok(readOnly.length > 0);
    for (const resource of readOnly) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const response = await send(method, `/v1/${resource.name}`, BODIES[1].headers, BODIES[1].payload);
        assert.equal(response.status, 405, `${method} /v1/${resource.name}: ${response.body}`);
        assert.equal(response.headers.allow, 'GET, HEAD');
      }
    }
  });

  test('a bare OPTIONS (not a CORS preflight) is a method like any other: 405 with Allow', async () => {
    const response = await send('OPTIONS', '/v1/cohorts', {});
    assert.equal(response.status, 405);
    assert.equal(response.headers.allow, 'GET, HEAD, POST, PUT, PATCH');
  });

  test('HEAD on every GET path: a Content-Length, when sent, is the GET\'s own (none where the body is never built)', async () => {
    for (const url of ['/v1/campuses?select=id', '/v1/students?limit=3', '/v1/changes', '/v1/changes/students?limit=2', '/v1/me', '/v1/openapi.json', '/healthz']) {
      const get = await send('GET', url, {});
      const head = await send('HEAD', url, {});
      assert.equal(head.status, get.status, url);
      assert.equal(head.body, '', url);
      const length = head.headers['content-length'];
      if (length !== undefined) assert.equal(Number(length), Buffer.byteLength(get.body), url);
    }
  });

  test('HEAD reads: the headers of a GET, no body', async () => {
    const response = await send('HEAD', '/v1/campuses?select=id', {});
    assert.equal(response.status, 200);
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(response.body, '');
  });

  test('an unknown resource with a body is 404 PGRST205, the body unread', async () => {
    for (const body of BODIES) {
      const response = await send('POST', '/v1/nope', body.headers, body.payload);
      assert.equal(response.status, 404, `${body.name}: ${response.body}`);
      assert.equal(response.json.code, 'PGRST205');
    }
  });

  test('a path below a resource\'s, with a body, is 404 PGRST125 after the token check, the body unread', async () => {
    for (const [method, url] of [['POST', '/v1/students/extra'], ['GET', '/v1/students/1'], ['GET', '/v1/campuses/'], ['PUT', '/v1/nope/x/y']]) {
      for (const body of BODIES) {
        const response = await send(method, url, body.headers, body.payload);
        assert.equal(response.status, 404, `${method} ${url} with ${body.name}: ${response.body}`);
        assert.deepEqual(response.json, { code: 'PGRST125', message: 'Invalid path specified in request URL', details: null, hint: null });
      }
      assert.equal((await send(method, url, {}, undefined, false)).status, 401, url);
    }
  });

  test('a path no route serves, with a body, is 404 NOT_FOUND, the body unread', async () => {
    for (const url of ['/nowhere', '/v2/students']) {
      for (const body of BODIES) {
        const response = await send('POST', url, body.headers, body.payload, false);
        assert.equal(response.status, 404, `${url} with ${body.name}: ${response.body}`);
        assert.deepEqual(response.json, { code: 'NOT_FOUND', message: `No endpoint at POST ${url}.`, details: null, hint: null });
      }
    }
  });

  test('without a token the answer is 401, before the method is looked at', async () => {
    for (const [method, url] of [['DELETE', '/v1/students'], ['POST', '/v1/campuses'], ['OPTIONS', '/v1/students'], ['POST', '/v1/nope']]) {
      const response = await send(method, url, BODIES[0].headers, undefined, false);
      assert.equal(response.status, 401, `${method} ${url}`);
      assert.equal(response.json.code, 'UNAUTHORIZED');
      assert.equal(response.headers.allow, undefined);
    }
  });

  test('/v1/openapi.json needs no token, so a method it does not serve is 405 without one, the body unread', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      for (const body of BODIES) {
        const response = await send(method, '/v1/openapi.json', body.headers, body.payload, false);
        assert.equal(response.status, 405, `${method} with ${body.name}: ${response.body}`);
        assert.equal(response.headers.allow, 'GET, HEAD');
        assert.equal(response.json.code, 'METHOD_NOT_ALLOWED');
      }
    }
  });

  test('/v1 and /v1/, the base URL a client is given, redirect to the description without a token; a method they do not serve is 405', async () => {
    for (const url of ['/v1', '/v1/']) {
      for (const method of ['GET', 'HEAD']) {
        for (const withToken of [false, true]) {
          const response = await send(method, url, {}, undefined, withToken);
          assert.equal(response.status, 302, `${method} ${url}: ${response.body}`);
          assert.equal(response.headers.location, '/v1/openapi.json', `${method} ${url}`);
        }
      }
      const refused = await send('POST', url, BODIES[1].headers, BODIES[1].payload, false);
      assert.equal(refused.status, 405, `POST ${url}: ${refused.body}`);
      assert.equal(refused.headers.allow, 'GET, HEAD');
    }
  });

  test('every root and operator path answers a method it does not serve with 405 and the Allow its routes give', async () => {
    const [{ id }] = await h.sql<{ id: string }>('select id from tokens limit 1');
    const refusals: [method: string, url: string, allow: string][] = [
      ['POST', '/healthz', 'GET, HEAD'],
      ['DELETE', '/readyz', 'GET, HEAD'],
      ['PUT', '/docs', 'GET, HEAD'],
      ['POST', '/docs/reference-page.js', 'GET, HEAD'],
      ['POST', '/metrics', 'GET, HEAD'],
      ['POST', '/', 'GET, HEAD'],
      ['OPTIONS', '/admin/v1/tokens', 'GET, HEAD, POST'],
      ['DELETE', '/admin/v1/consortia', 'GET, HEAD, POST'],
      ['PATCH', `/admin/v1/tokens/${id}`, 'GET, HEAD, DELETE'],
      ['GET', `/admin/v1/tokens/${id}/rotate`, 'POST'],
      ['GET', '/admin/v1/demo', 'POST'],
    ];
    for (const [method, url, allow] of refusals) {
      for (const body of BODIES) {
        const response = await send(method, url, body.headers, body.payload, false);
        assert.equal(response.status, 405, `${method} ${url} with ${body.name}: ${response.body}`);
        assert.equal(response.headers.allow, allow, `${method} ${url}`);
        assert.deepEqual(response.json, {
          code: 'METHOD_NOT_ALLOWED', message: `${method} is not allowed here.`, details: null, hint: `Allowed: ${allow}.`,
        });
      }
    }
  });

  test('a path nothing serves stays 404 for every method, root and operator paths included', async () => {
    for (const url of ['/healthz/deeper', '/admin/v1/nope', '/admin/v1', '/docs/assets/unlinked.js', '/metricsz']) {
      for (const method of ['GET', 'POST', 'OPTIONS']) {
        const response = await send(method, url, BODIES[1].headers, BODIES[1].payload, false);
        assert.equal(response.status, 404, `${method} ${url}: ${response.body}`);
        assert.deepEqual(response.json, { code: 'NOT_FOUND', message: `No endpoint at ${method} ${url}.`, details: null, hint: null });
      }
    }
  });

  test('the served methods still read their bodies: a broken PUT body is 400 INVALID_BODY', async () => {
    const response = await send('PUT', '/v1/students', BODIES[1].headers, BODIES[1].payload);
    assert.equal(response.status, 400);
    assert.equal(response.json.code, 'INVALID_BODY');
  });
});
