/**
 * Real responses against the served OpenAPI description (test/support/openapi.ts): full rows of
 * every resource strictly, a narrowed select as sent, every write outcome
 * (rejected rows sent without their key included), and error bodies with their statuses and
 * headers, each validated by Ajv against the schema the description gives that response.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { READ_MEDIA_TYPES, STRIPPED_MEDIA_TYPES, mediaTypeName, mediaTypeWithParameters } from '../src/query/media-types.ts';
import { resources } from '../src/resources/registry.ts';
import type { DemoUniversity } from '../src/domain/demo.ts';
import { Harness, type Response, backends } from './support/harness.ts';
import { DescriptionValidator } from './support/openapi.ts';

const SINGULAR_MEDIA_TYPE = mediaTypeName(READ_MEDIA_TYPES.singular);

for (const backend of backends()) {
  describe(`responses match the OpenAPI description on ${backend}`, () => {
    let h: Harness;
    let v: DescriptionValidator;
    let north: DemoUniversity;

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 20 });
      v = new DescriptionValidator((await h.get('/v1/openapi.json', null)).json);
      north = h.demo!.universities[0];
    });
    after(() => h.close());

    const assertMatches = (method: string, url: string, res: Response, mediaType = 'application/json') => {
      const path = url.split('?')[0];
      assert.deepEqual(v.bodyProblems(method, path, res.status, res.json, mediaType), [], `${method} ${url} ${res.status}: ${res.body.slice(0, 300)}`);
      assert.deepEqual(v.headerProblems(method, path, res.status, res.headers), [], `${method} ${url} ${res.status} headers`);
    };

    const write = (method: 'PUT' | 'POST' | 'PATCH', resource: string, rows: unknown[], token = north.write_token) => h.request({
      method, url: `/v1/${resource}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: { [resource]: rows },
    });

    test('full rows of every resource match strictly: every column present, typed, nothing undocumented', async () => {
      for (const resource of resources) {
        const url = `/v1/${resource.name}?limit=5`;
        const res = await h.get(url, north.read_token);
        assert.equal(res.status, 200, resource.name);
        assert.ok(res.json.length > 0, `${resource.name} has demo rows to check`);
        for (const row of res.json) assert.deepEqual(Object.keys(row), resource.columns.map((c) => c.name), resource.name);
        assertMatches('GET', url, res);
      }
    });

    test('a page narrowed by select matches the description as sent, in every resource', async () => {
      for (const resource of resources) {
        const columns = resource.columns.filter((_, i) => i % 3 === 0).map((c) => c.name);
        const url = `/v1/${resource.name}?select=${columns.join(',')}&limit=3`;
        const res = await h.get(url, north.read_token);
        assert.equal(res.status, 200, resource.name);
        for (const row of res.json) assert.deepEqual(Object.keys(row), columns);
        assertMatches('GET', url, res);
      }
    });

    test('a single object and a counted partial page match', async () => {
      const [cohort] = (await h.get('/v1/cohorts?limit=1', north.read_token)).json;
      const single = await h.get(`/v1/cohorts?id=eq.${cohort.id}`, north.read_token, { accept: SINGULAR_MEDIA_TYPE });
      assert.equal(single.status, 200);
      assert.equal(single.json.id, cohort.id);
      assertMatches('GET', '/v1/cohorts', single, SINGULAR_MEDIA_TYPE);
      const partial = await h.get('/v1/students?limit=2', north.read_token, { prefer: 'count=exact' });
      assert.equal(partial.status, 206);
      assert.match(String(partial.headers['content-range']), /^0-1\/\d+$/);
      assertMatches('GET', '/v1/students', partial);
    });

    test('a HEAD of a counted page answers the headers its own operation documents, and every header the service adds is documented', async () => {
      const get = await h.get('/v1/students?limit=2', north.read_token, { prefer: 'count=exact' });
      const head = await h.request({ method: 'HEAD', url: '/v1/students?limit=2', headers: { authorization: `Bearer ${north.read_token}`, prefer: 'count=exact' } });
      assert.equal(head.status, 206);
      assert.equal(head.body, '');
      assert.deepEqual(v.headerProblems('HEAD', '/v1/students', 206, head.headers), []);
      for (const [method, res] of [['GET', get], ['HEAD', head]] as const) {
        const documented = Object.keys(v.response(method, '/v1/students', 206).response.headers).map((name) => name.toLowerCase());
        for (const name of ['content-range', 'preference-applied', 'x-request-id', 'ratelimit-limit']) {
          assert.ok(res.headers[name] !== undefined && documented.includes(name), `${method} ${name}`);
        }
      }
    });

    test('a HEAD reads no Range header, and its operation documents none', async () => {
      const headers = { authorization: `Bearer ${north.read_token}`, prefer: 'count=exact', range: '0-0' };
      const get = await h.request({ method: 'GET', url: '/v1/campuses', headers });
      const head = await h.request({ method: 'HEAD', url: '/v1/campuses', headers });
      assert.equal(get.status, 206);
      assert.match(String(get.headers['content-range']), /^0-0\/\d+$/);
      const total = Number(String(get.headers['content-range']).split('/')[1]);
      assert.ok(total > 1);
      assert.deepEqual([head.status, head.headers['content-range']], [200, `0-${total - 1}/${total}`]);
      const documented = (method: 'get' | 'head') => (v.doc.paths['/campuses'][method].parameters as { $ref?: string }[]).some((p) => p.$ref === '#/components/parameters/Range');
      assert.deepEqual([documented('get'), documented('head')], [true, false]);
    });

    test('pages and single objects with nulls stripped match under their own media types', async () => {
      for (const contentType of Object.values(STRIPPED_MEDIA_TYPES)) {
        const accept = mediaTypeWithParameters(contentType);
        const url = `/v1/students?select=id,phone,graduation_date&limit=${contentType === STRIPPED_MEDIA_TYPES.json ? 5 : 1}`;
        const res = await h.get(url, north.read_token, { accept });
        assert.equal(res.headers['content-type'], contentType);
        assert.ok(![res.json].flat().some((row: Record<string, unknown>) => Object.values(row).includes(null)), 'no null members');
        assertMatches('GET', url, res, accept);
      }
    });

    test('every student write outcome matches, rejected rows sent without an email included', async () => {
      const [{ name: cohort }] = await h.sql<{ name: string }>('select name from cohorts where university_id = $1 order by name limit 1', [north.id]);
      const student = (email: string) => ({ email, first_name: 'Ada', last_name: 'Lovelace', cohort_name: cohort, is_alumni: false });
      const responses = [
        await write('PUT', 'students', [
          student('ada.openapi@example.edu'), student('byron.openapi@example.edu'), { ...student('typo.openapi@example.edu'), frist_name: 'Ada' },
          { first_name: 'No', last_name: 'Address', cohort_name: cohort, is_alumni: false }, 'not an object',
        ]),
        await write('PUT', 'students', [student('ada.openapi@example.edu'), { ...student('byron.openapi@example.edu'), last_name: 'Byron' }]),
        await write('POST', 'students', [student('ada.openapi@example.edu')]),
        await write('PATCH', 'students', [{ first_name: 'Nobody' }, { email: 'nobody.openapi@example.edu', first_name: 'Nobody' }]),
      ];
      const methods = ['PUT', 'PUT', 'POST', 'PATCH'];
      responses.forEach((res, i) => {
        assert.equal(res.status, 200, res.body);
        assertMatches(methods[i], '/v1/students', res);
      });
      const results = responses.flatMap((res) => res.json.results);
      assert.deepEqual(new Set(results.map((r) => r.status)), new Set(['created', 'updated', 'unchanged', 'rejected']));
      assert.deepEqual(results.filter((r) => r.email === null).map((r) => r.code), ['INVALID_EMAIL', 'INVALID_FIELD', 'INVALID_EMAIL']);
      assert.deepEqual(new Set(results.map((r) => r.code).filter(Boolean)), new Set(['INVALID_EMAIL', 'INVALID_FIELD', 'ALREADY_EXISTS', 'NOT_FOUND']));
      assert.deepEqual(responses[0].json.dropped_fields, ['frist_name']);
    });

    test('every cohort write outcome matches, rejected rows sent without a name included', async () => {
      const cohort = (name: string) => ({
        name, display_name: name, program: 'Computing', degree: 'BSc', start_date: '2025-09-01', end_date: '2028-06-30', intake_year: 2025, intake_term: 'Fall',
      });
      const responses = [
        await write('PUT', 'cohorts', [cohort('OpenAPI A'), cohort('OpenAPI B'), { ...cohort('OpenAPI C'), intake_term: 'Monsoon' }, { display_name: 'No name' }]),
        await write('PUT', 'cohorts', [cohort('OpenAPI A'), { ...cohort('OpenAPI B'), program: 'Mathematics' }]),
        await write('POST', 'cohorts', [cohort('OpenAPI A')]),
        await write('PATCH', 'cohorts', [{ name: 'OpenAPI Z', program: 'History' }, { program: 'History' }]),
      ];
      const methods = ['PUT', 'PUT', 'POST', 'PATCH'];
      responses.forEach((res, i) => {
        assert.equal(res.status, 200, res.body);
        assertMatches(methods[i], '/v1/cohorts', res);
      });
      const results = responses.flatMap((res) => res.json.results);
      assert.deepEqual(new Set(results.map((r) => r.status)), new Set(['created', 'updated', 'unchanged', 'rejected']));
      assert.deepEqual(results.filter((r) => r.name === null).map((r) => r.code), ['MISSING_FIELD', 'MISSING_FIELD']);
      assert.deepEqual(new Set(results.map((r) => r.code).filter(Boolean)), new Set(['INVALID_FIELD', 'MISSING_FIELD', 'ALREADY_EXISTS', 'NOT_FOUND']));
    });

    test('error bodies match the responses documented for their statuses, headers included', async () => {
      const read = { authorization: `Bearer ${north.read_token}` };
      const writeJson = { authorization: `Bearer ${north.write_token}`, 'content-type': 'application/json' };
      const cases: [method: 'GET' | 'PUT', url: string, headers: Record<string, string>, payload: string | undefined, status: number, code: string][] = [
        ['GET', '/v1/students?limit=x', read, undefined, 400, 'PGRST100'],
        ['GET', '/v1/students?nickname=eq.x', read, undefined, 400, '42703'],
        ['GET', '/v1/students?id=eq.not-a-uuid', read, undefined, 400, '22P02'],
        ['GET', '/v1/students?id=like.1*', read, undefined, 404, '42883'],
        ['GET', '/v1/students', {}, undefined, 401, 'UNAUTHORIZED'],
        ['GET', '/v1/students?limit=2', { ...read, accept: SINGULAR_MEDIA_TYPE }, undefined, 406, 'PGRST116'],
        ['GET', `/v1/students?email=in.(${'x'.repeat(20_000)})`, read, undefined, 414, 'URI_TOO_LONG'],
        ['GET', '/v1/students?offset=100000', { ...read, prefer: 'count=exact' }, undefined, 416, 'PGRST103'],
        ['PUT', '/v1/students', { ...writeJson, authorization: `Bearer ${north.read_token}` }, '{"students":[]}', 403, 'WRITE_NOT_ENABLED'],
        ['PUT', '/v1/students', writeJson, '{"rows":[]}', 400, 'INVALID_BODY'],
        ['PUT', '/v1/students', writeJson, JSON.stringify({ students: Array.from({ length: 501 }, () => ({})) }), 413, 'BATCH_TOO_LARGE'],
        ['PUT', '/v1/students', { ...writeJson, 'content-type': 'text/plain' }, 'students', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ];
      for (const [method, url, headers, payload, status, code] of cases) {
        const res = await h.request({ method, url, headers, payload });
        assert.equal(res.status, status, `${method} ${url.slice(0, 60)}: ${res.body.slice(0, 200)}`);
        assert.equal(res.json.code, code);
        assertMatches(method, url, res);
        // The rate limit's headers it carries are documented for its status.
        const documented = Object.keys(v.response(method, url.split('?')[0], status).response.headers ?? {}).map((name) => name.toLowerCase());
        const carried = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].filter((name) => res.headers[name] !== undefined);
        assert.deepEqual(carried.filter((name) => !documented.includes(name)), [], `${method} ${url.slice(0, 60)} ${status}`);
        assert.equal(carried.length, 3, `${method} ${url.slice(0, 60)} ${status}`);
      }
    });

    test('the calling token, the probes and the description itself match', async () => {
      for (const [url, token] of [['/v1/me', north.read_token], ['/healthz', null], ['/readyz', null], ['/v1/openapi.json', null]] as const) {
        const res = await h.get(url, token);
        assert.equal(res.status, 200, url);
        assertMatches('GET', url, res);
      }
    });
  });
}

describe('a rate-limited response matches the OpenAPI description', () => {
  let h: Harness;
  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 5, settings: { readLimitPerMin: 1 } });
  });
  after(() => h.close());

  test('429 carries the error body, Retry-After and the RateLimit headers as documented', async () => {
    const v = new DescriptionValidator((await h.get('/v1/openapi.json', null)).json);
    const token = h.demo!.universities[0].read_token;
    const first = await h.get('/v1/campuses', token);
    assert.equal(first.status, 200);
    assert.deepEqual(v.headerProblems('GET', '/v1/campuses', 200, first.headers), []);
    const limited = await h.get('/v1/campuses', token);
    assert.equal(limited.status, 429);
    assert.deepEqual(v.bodyProblems('GET', '/v1/campuses', 429, limited.json), []);
    assert.deepEqual(v.headerProblems('GET', '/v1/campuses', 429, limited.headers), []);
    const documented = Object.keys(v.response('GET', '/v1/campuses', 429).response.headers).map((name) => name.toLowerCase()).sort();
    assert.deepEqual(documented, ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'x-request-id']);
    for (const name of documented) assert.ok(limited.headers[name] !== undefined, name);
  });
});
