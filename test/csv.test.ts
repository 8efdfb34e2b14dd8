/**
 * CSV reads (Accept: text/csv): what PostgreSQL writes, read back by a real CSV parser
 * (test/support/csv.ts), equals the JSON read of the same plan, value for value, on hostile
 * values; over HTTP, whole and streamed pages, counts, ranges, HEAD and empty pages.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Scope } from '../src/db/database.ts';
import { READ_MEDIA_TYPES, type ReadMediaType } from '../src/query/media-types.ts';
import { planRead } from '../src/query/plan.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { assertCsvEqualsJson, parseCsv } from './support/csv.ts';
import { Harness, storeBackends } from './support/harness.ts';

const HOSTILE_STUDENTS = [
  { first_name: 'Comma, Jr.', last_name: 'Say "hi", ""twice""', external_id: 'x,"y"', phone: '' },
  { first_name: 'Zoë 🎓 李', last_name: ' spaced out ', external_id: 'line one\nline two\r\nthree\rfour', phone: null },
  { first_name: '"', last_name: ',', external_id: '', phone: '\r\n' },
];
const HOSTILE_PROFILE = {
  headline: '', summary: 'tab\there, "quoted", and\nnew line',
  skills: ['a,b', 'say "x"', '', 'ünï'], sections: [{ title: 'x,\n"y"', items: [1, null, true] }],
};

for (const backend of storeBackends()) {
  describe(`CSV on ${backend}`, () => {
    let h: Harness;
    let scope: Scope;
    let token: string;
    const hostileIds: string[] = [];

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 40 });
      const university = h.demo!.universities[0];
      scope = { universityIds: [university.id] };
      token = university.read_token;
      const ids = await h.sql<{ id: string }>('select id from students where university_id = $1 order by id limit 3', [university.id]);
      for (const [i, values] of HOSTILE_STUDENTS.entries()) {
        await h.sql('update students set first_name = $2, last_name = $3, external_id = $4, phone = $5 where id = $1',
          [ids[i].id, values.first_name, values.last_name, values.external_id, values.phone]);
        hostileIds.push(ids[i].id);
      }
      await h.sql(`update student_profiles set headline = $2, summary = $3, skills = $4::text[], sections = $5::jsonb
        where student_id = $1`, [ids[0].id, HOSTILE_PROFILE.headline, HOSTILE_PROFILE.summary,
        `{${HOSTILE_PROFILE.skills.map((s) => `"${s.replace(/["\\]/g, '\\$&')}"`).join(',')}}`, JSON.stringify(HOSTILE_PROFILE.sections)]);
    });
    after(() => h.close());

    /** The page statement's body for `query` in `mediaType`, run in the university's scope. */
    async function pageBody(resource: string, query: string, mediaType: ReadMediaType): Promise<string> {
      const plan = planRead(resourcesByName.get(resource)!, parseReadRequest({ queryString: query, method: 'GET', acceptHeader: READ_MEDIA_TYPES[mediaType] }));
      assert.equal(plan.mediaType, mediaType);
      const statement = buildPageStatement(plan, scope.universityIds, { exactCount: false, body: true });
      const [row] = await h.db.asPartner(scope, (tx) => tx.query<{ body: string }>(statement.text, statement.params));
      return row.body;
    }

    test('the SQL builder\'s CSV reads back as the JSON of the same plan, hostile values included', async () => {
      for (const [resource, query] of [
        ['students', `id=in.(${hostileIds.join(',')})&order=id`],
        ['students', 'order=id'],
        ['student_profiles', 'order=id'],
        ['cohorts', 'select=name,n:intake_year,templates:resume_template_names,start_date,created_at&order=id'],
      ]) {
        const rows = JSON.parse(await pageBody(resource, query, 'json')) as Record<string, unknown>[];
        assert.ok(rows.length > 0, `${resource}?${query} reads rows`);
        assertCsvEqualsJson(await pageBody(resource, query, 'csv'), rows, Object.keys(rows[0]));
      }
    });

    test('quoting: fields with a comma, quote, CR or LF are quoted, quotes doubled; "" is the empty string, nothing is NULL', async () => {
      const csv = await pageBody('students', `select=first_name,last_name,external_id,phone&id=in.(${hostileIds.join(',')})&order=id`, 'csv');
      const records = csv.split('\r\n');
      assert.equal(records[0], 'first_name,last_name,external_id,phone');
      const expected = HOSTILE_STUDENTS.map((s) => [s.first_name, s.last_name, s.external_id, s.phone]);
      const sortedIds = [...hostileIds].sort();
      const byId = new Map(hostileIds.map((id, i) => [id, expected[i]]));
      assert.deepEqual(parseCsv(csv).slice(1), sortedIds.map((id) => byId.get(id)));
      assert.ok(csv.includes('"Comma, Jr.","Say ""hi"", """"twice""""","x,""y""",""\r\n'), csv);
      assert.ok(csv.includes('"""",",","","\r\n"\r\n'), csv);
    });

    test('timestamps, dates, booleans, arrays and JSON as the JSON reads write them', async () => {
      const csv = await pageBody('student_profiles', `select=skills,sections,updated_at&student_id=eq.${hostileIds[0]}`, 'csv');
      const [, [skills, sections, updatedAt]] = parseCsv(csv);
      assert.deepEqual(JSON.parse(skills!), HOSTILE_PROFILE.skills);
      assert.deepEqual(JSON.parse(sections!), HOSTILE_PROFILE.sections);
      assert.match(updatedAt!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
      const students = parseCsv(await pageBody('students', 'select=is_alumni,graduation_date&graduation_date=not.is.null&limit=1', 'csv'));
      assert.match(students[1][0]!, /^(true|false)$/);
      assert.match(students[1][1]!, /^\d{4}-\d\d-\d\d$/);
    });

    test('no rows: the header record alone', async () => {
      assert.equal(await pageBody('students', 'select=id,mail:email&email=eq.nobody', 'csv'), 'id,mail\r\n');
    });

    const csvGet = (url: string, headers: Record<string, string> = {}) => h.get(url, token, { accept: 'text/csv', ...headers });

    test('over HTTP: text/csv; charset=utf-8, whole (limit) and streamed (no limit) pages equal the JSON reads', async () => {
      for (const url of ['/v1/students?order=id&limit=25', '/v1/students?order=id', '/v1/student_profiles?order=id']) {
        const csv = await csvGet(url);
        assert.equal(csv.status, 200, csv.body);
        assert.equal(csv.headers['content-type'], 'text/csv; charset=utf-8');
        const json = await h.get(url, token);
        assert.equal(csv.headers['content-range'], json.headers['content-range']);
        assertCsvEqualsJson(csv.body, json.json, Object.keys(json.json[0]));
      }
    });

    test('over HTTP: an empty streamed page still has its header', async () => {
      const response = await csvGet('/v1/students?select=email,id&email=eq.nobody');
      assert.equal(response.status, 200);
      assert.equal(response.body, 'email,id\r\n');
    });

    test('over HTTP: counts, Range and 206 as for JSON; HEAD has the headers and no body', async () => {
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from students where university_id = $1', [scope.universityIds[0]]);
      const ranged = await csvGet('/v1/students?select=id&order=id', { range: '2-6', prefer: 'count=exact' });
      assert.equal(ranged.status, 206);
      assert.equal(ranged.headers['content-range'], `2-6/${n}`);
      assert.equal(ranged.headers['preference-applied'], 'count=exact');
      const ids = await h.sql<{ id: string }>('select id from students where university_id = $1 order by id offset 2 limit 5', [scope.universityIds[0]]);
      assert.deepEqual(parseCsv(ranged.body), [['id'], ...ids.map((r) => [r.id])]);
      const head = await h.request({ method: 'HEAD', url: '/v1/students?select=id', headers: { authorization: `Bearer ${token}`, accept: 'text/csv', prefer: 'count=exact' } });
      assert.equal(head.status, 200);
      assert.equal(head.headers['content-type'], 'text/csv; charset=utf-8');
      assert.equal(head.headers['content-range'], `0-${n - 1}/${n}`);
      assert.equal(head.body, '');
    });
  });
}
