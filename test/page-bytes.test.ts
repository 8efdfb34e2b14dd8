/**
 * A page sent whole goes out as the bytes PostgreSQL wrote (src/query/execute.ts, readWhole):
 * text outside ASCII arrives intact with a Content-Length of its bytes, in JSON and CSV; a
 * consortium's page, on Citus put in its array by the service from one row per object
 * (src/query/execute.ts sentAsRows), reads byte for byte as the page PostgreSQL aggregates for
 * the same request with a count; its HEAD counts the same rows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Harness, storeBackends } from './support/harness.ts';

/** Names that take two, three and four bytes a character in UTF-8, and JSON escapes. */
const NAMES = ['Zoë Ñandú', '李小龍', 'Ana 😀 "Quote" \\ back', 'Ørjan Åsmund'];

for (const backend of storeBackends()) {
  describe(`whole pages as PostgreSQL's bytes on ${backend}`, () => {
    let h: Harness;
    let consortium: string;
    let university: string;
    before(async () => {
      h = await Harness.start(backend, { demoStudents: 60 });
      consortium = h.demo!.consortium.read_token;
      university = h.demo!.universities[0].read_token;
      // The first students of the consortium's universities, in id order, take the names.
      const members = h.demo!.universities.slice(0, 3).map((u) => u.id);
      const firsts = await h.sql<{ id: string }>('select id from students where university_id = any($1::uuid[]) order by id limit $2',
        [`{${members.join(',')}}`, String(NAMES.length)]);
      for (const [i, { id }] of firsts.entries()) await h.sql('update students set first_name = $1 where id = $2', [NAMES[i], id]);
    });
    after(() => h.close());

    const query = '/v1/students?select=id,first_name,last_name&order=id&limit=20';

    test('a page with text outside ASCII arrives intact, its Content-Length its bytes', async () => {
      for (const token of [university, consortium]) {
        const res = await h.get(query, token);
        assert.equal(res.status, 200);
        assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
        assert.equal(res.json.length, 20);
      }
      const names = (await h.get(query, consortium)).json.map((s: { first_name: string }) => s.first_name);
      assert.deepEqual(names.slice(0, NAMES.length), NAMES);
    });

    test('a consortium page framed from its rows is byte for byte the page PostgreSQL aggregates', async () => {
      const framed = await h.get(query, consortium);
      // With a count the page is one aggregated statement (sentAsRows is false).
      const aggregated = await h.get(query, consortium, { prefer: 'count=exact' });
      assert.match(String(aggregated.headers['content-range']), /^0-19\/\d+$/);
      assert.equal(framed.headers['content-range'], '0-19/*');
      assert.equal(framed.body, aggregated.body);
    });

    test('HEAD of a consortium page answers the GET\'s status and Content-Range, with no body', async () => {
      const get = await h.get(query, consortium);
      const head = await h.request({ method: 'HEAD', url: query, headers: { authorization: `Bearer ${consortium}` } });
      assert.equal(head.status, get.status);
      assert.equal(head.headers['content-range'], get.headers['content-range']);
      assert.equal(head.body, '');
    });

    test('a CSV page with text outside ASCII arrives intact, its Content-Length its bytes', async () => {
      const res = await h.get(query.replace('select=id,first_name,last_name', 'select=first_name'), consortium, { accept: 'text/csv' });
      assert.equal(res.status, 200);
      assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
      const names = res.body.split('\r\n').slice(1, 1 + NAMES.length);
      assert.deepEqual(names, NAMES.map((name) => (/[",\r\n]/.test(name) ? `"${name.replaceAll('"', '""')}"` : name)));
    });
  });
}
