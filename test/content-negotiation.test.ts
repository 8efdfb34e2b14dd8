/**
 * The Accept header (src/query/media-types.ts): reads answer JSON, the single object or CSV by
 * q-values, wildcards and lists, the JSON forms also with nulls stripped; writes answer JSON
 * only; anything else is 406 PGRST107 with the documented body, before a read runs or a write is
 * applied.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../src/errors.ts';
import { READ_MEDIA_TYPES, type ReadMediaType, STRIPPED_MEDIA_TYPES, negotiateRead, requireJsonAccept } from '../src/query/media-types.ts';
import { Harness } from './support/harness.ts';

const READ_CHOICES: [string | undefined, ReadMediaType | 'json stripped' | 'singular stripped'][] = [
  [undefined, 'json'],
  ['', 'json'],
  // A list of empty elements is an empty list (RFC 9110, 5.6.1): as no Accept.
  [' , ,', 'json'],
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
  ['*/*', 'json'],
  ['application/*', 'json'],
  ['APPLICATION/JSON', 'json'],
  ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'json'],
  ['application/xml, */*;q=0.1', 'json'],
  ['application/vnd.pgrst.object+json', 'singular'],
  ['application/vnd.pgrst.object+json, application/json;q=0.9', 'singular'],
  ['text/csv', 'csv'],
  ['text/*', 'csv'],
  ['text/csv, application/json;q=0.5', 'csv'],
  ['application/json;q=0.5, text/csv', 'csv'],
  ['application/json;q=0.2, text/csv;q=0.9', 'csv'],
  // The single object only when named: a wildcard chooses among JSON and CSV.
  ['application/json;q=0, */*', 'csv'],
  ['application/vnd.pgrst.object+json;q=0, */*', 'json'],
  ['application/vnd.pgrst.object+json;q=0.5, application/json', 'json'],
  ['application/*;q=0.9, application/vnd.pgrst.object+json;q=0.1', 'json'],
  ['*/*;q=0.5, application/vnd.pgrst.object+json', 'singular'],
  ['Application/Vnd.Pgrst.Object+JSON', 'singular'],
  ['application/vnd.pgrst.object+json; charset=utf-8', 'singular'],
  // PostgREST's array type is JSON; with nulls=stripped, either JSON form leaves out null members.
  ['application/vnd.pgrst.array+json', 'json'],
  ['application/vnd.pgrst.array+json;nulls=stripped', 'json stripped'],
  ['application/vnd.pgrst.array+json; nulls=stripped', 'json stripped'],
  ['application/vnd.pgrst.object+json;nulls=stripped', 'singular stripped'],
  ['application/vnd.pgrst.array+json;nulls=stripped;q=0, application/json', 'json'],
  ['text/csv;q=0.5, application/vnd.pgrst.array+json;nulls=stripped', 'json stripped'],
  // At equal q-values the more specific range wins whatever the order, as PostgREST orders them
  // (wai-extra's parseHttpAccept: by q, then by parameters less wildcards).
  ['*/*, text/csv', 'csv'],
  ['application/*, text/csv', 'csv'],
  ['application/json, application/vnd.pgrst.array+json;nulls=stripped', 'json stripped'],
  // PostgREST also takes its vendor types named without +json.
  ['application/vnd.pgrst.object', 'singular'],
  ['application/vnd.pgrst.object;nulls=stripped', 'singular stripped'],
  ['application/vnd.pgrst.array', 'json'],
  ['application/vnd.pgrst.array;nulls=stripped', 'json stripped'],
  ['application/vnd.pgrst.object;q=0, */*', 'json'],
];

const REFUSED = [
  'application/xml',
  'text/html',
  'application/vnd.pgrst.plan',
  'application/vnd.pgrst.plan+text; for="application/json"; options=;',
  'application/geo+json',
  'application/json;q=0',
  'text/csv; charset=iso-8859-1',
  'application/vnd.pgrst.array+json;nulls=kept',
  'text/csv;nulls=stripped',
  'application/json;q=0, application/*',
  'application/json;q=0, text/csv;q=0, */*',
];

function assertRefused(accept: string, run: () => unknown): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 406);
    assert.equal(error.code, 'PGRST107');
    assert.equal(error.message, `None of these media types are available: ${accept}`);
    return true;
  }, accept);
}

describe('negotiating a read', () => {
  for (const [accept, chosen] of READ_CHOICES) {
    test(`${accept === undefined ? '(no Accept)' : JSON.stringify(accept)} → ${chosen}`, () => {
      const [mediaType, stripped] = chosen.split(' ') as [ReadMediaType, string?];
      const contentType = stripped ? STRIPPED_MEDIA_TYPES[mediaType as keyof typeof STRIPPED_MEDIA_TYPES] : READ_MEDIA_TYPES[mediaType];
      assert.deepEqual(negotiateRead(accept), { mediaType, nullsStripped: stripped !== undefined, contentType });
    });
  }
  for (const accept of REFUSED) {
    test(`${JSON.stringify(accept)} → 406 PGRST107`, () => assertRefused(accept, () => negotiateRead(accept)));
  }
});

describe('negotiating a write', () => {
  for (const accept of [undefined, 'application/json', '*/*', 'application/*', 'text/csv, application/json;q=0.1']) {
    test(`${accept ?? '(no Accept)'} is answered in JSON`, () => assert.doesNotThrow(() => requireJsonAccept(accept)));
  }
  for (const accept of ['text/csv', 'application/vnd.pgrst.object+json', 'application/xml']) {
    test(`${accept} → 406 PGRST107`, () => assertRefused(accept, () => requireJsonAccept(accept)));
  }
});

describe('Accept over HTTP', () => {
  let h: Harness;
  let university: { id: string; read_token: string; write_token: string };

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 10 });
    university = h.demo!.universities[0];
  });
  after(() => h.close());

  test('a read with an Accept it cannot answer is 406 PGRST107 in the error body, naming what was asked', async () => {
    for (const accept of ['application/xml', 'application/vnd.pgrst.plan+json; for="application/json"']) {
      const response = await h.get('/v1/students?select=id', university.read_token, { accept });
      assert.equal(response.status, 406);
      assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(response.json, {
        code: 'PGRST107',
        message: `None of these media types are available: ${accept}`,
        details: null,
        hint: 'Accept application/json, application/vnd.pgrst.array+json, application/vnd.pgrst.object+json, text/csv.',
      });
    }
  });

  test('a bad range is 416 whatever the Accept, and a bad Accept 406 before a preference refused under handling=strict, as PostgREST orders them', async () => {
    for (const [query, headers] of [['limit=-1', {}], ['', { range: '3-1' }]] as const) {
      const response = await h.get(`/v1/students?select=id&${query}`, university.read_token, { accept: 'application/xml', prefer: 'handling=strict, foo=bar', ...headers });
      assert.deepEqual([response.status, response.json.code], [416, 'PGRST103'], query);
    }
    const response = await h.get('/v1/students?select=nosuch', university.read_token, { accept: 'application/xml', prefer: 'handling=strict, foo=bar' });
    assert.deepEqual([response.status, response.json.code], [406, 'PGRST107']);
  });

  test('q-values pick the media type of the answer', async () => {
    const csv = await h.get('/v1/cohorts?select=name&limit=1', university.read_token, { accept: 'text/csv, application/json;q=0.5' });
    assert.equal(csv.headers['content-type'], 'text/csv; charset=utf-8');
    assert.match(csv.body, /^name\r\n/);
    const json = await h.get('/v1/cohorts?select=name&limit=1', university.read_token, { accept: 'application/xml, */*;q=0.1' });
    assert.equal(json.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(json.json.length, 1);
  });

  test('a read names in Vary every request header its answer is chosen by, so that a cache cannot give a CSV page to a JSON client', async () => {
    const vary = (response: { headers: Record<string, unknown> }) => String(response.headers.vary).split(/\s*,\s*/).map((name) => name.toLowerCase()).sort();
    for (const [accept, origin] of [['text/csv', undefined], ['application/json', 'https://app.example']] as const) {
      for (const method of ['GET', 'HEAD'] as const) {
        const response = await h.request({
          method, url: '/v1/cohorts?select=name&limit=1',
          headers: { authorization: `Bearer ${university.read_token}`, accept, prefer: 'count=exact', range: '0-0', ...(origin ? { origin } : {}) },
        });
        assert.equal(response.status, 206, `${method} ${accept}`);
        assert.deepEqual(vary(response), ['accept', 'origin', 'prefer', 'range'], `${method} ${accept}`);
      }
    }
    // Reported in an audit: a refusal by one of them, and the change feed and /v1/me, which answer JSON or 406 by Accept, named Origin alone.
    const refused = await h.get('/v1/cohorts?select=name', university.read_token, { accept: 'application/xml' });
    assert.equal(refused.status, 406);
    assert.deepEqual(vary(refused), ['accept', 'origin', 'prefer', 'range']);
    for (const url of ['/v1/changes?limit=1', '/v1/me']) {
      for (const accept of ['application/json', 'text/csv']) {
        const response = await h.get(url, university.read_token, { accept, origin: 'https://app.example' });
        assert.equal(response.status, accept === 'text/csv' ? 406 : 200, `${url} ${accept}`);
        assert.deepEqual(vary(response), ['accept', 'origin'], `${url} ${accept}`);
      }
    }
  });

  test('a wildcard never selects the single object: JSON refused and */* is CSV, not one object', async () => {
    const response = await h.get('/v1/cohorts?select=name&limit=1', university.read_token, { accept: 'application/json;q=0, */*' });
    assert.equal(response.status, 200);
    assert.equal(response.headers['content-type'], 'text/csv; charset=utf-8');
    assert.match(response.body, /^name\r\n/);
  });

  test('a write that refuses JSON is 406 and writes nothing; one that takes JSON is applied', async () => {
    const put = (accept: string) => h.request({
      method: 'PUT', url: '/v1/cohorts',
      headers: { authorization: `Bearer ${university.write_token}`, 'content-type': 'application/json', accept },
      payload: { cohorts: [{ name: 'Negotiated', display_name: 'N', program: 'P', degree: 'BSc', start_date: '2030-09-01', end_date: '2033-06-30', intake_year: 2030, intake_term: 'Fall' }] },
    });
    const stored = async () => (await h.sql('select id from cohorts where university_id = $1 and name = $2', [university.id, 'Negotiated'])).length;
    for (const accept of ['text/csv', 'application/vnd.pgrst.object+json']) {
      const refused = await put(accept);
      assert.equal(refused.status, 406);
      assert.equal(refused.json.code, 'PGRST107');
      assert.equal(refused.json.hint, 'Accept application/json.');
    }
    assert.equal(await stored(), 0);
    const applied = await put('application/json');
    assert.equal(applied.status, 200);
    assert.equal(applied.json.counts.created, 1);
    assert.equal(await stored(), 1);
  });
});
