/**
 * Conformance of the read language, topic by topic as PostgREST documents it. Each case compares the API's
 * answer with PostgreSQL's own answer for the equivalent SQL, within the token's university.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Harness, storeBackends } from './support/harness.ts';

for (const backend of storeBackends()) {
  describe(`read language on ${backend}`, () => {
    let h: Harness;
    let university: string;
    let token: string;

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 90 });
      university = h.demo!.universities[0].id;
      token = h.demo!.universities[0].read_token;
      for (const name of ['Main, North', 'Quote "Q" Hall', 'Back\\slash', 'Paren (East)']) {
        assert.equal((await h.admin('POST', '/campuses', { university_id: university, name, city: null })).status, 201);
      }
    });
    after(() => h.close());

    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

    /** The API's ids for `query` equal PostgreSQL's for `where`, both ordered by id. */
    async function sameRows(resource: string, relation: string, query: string, where: string, params: string[] = []) {
      const res = await h.get(`/v1/${resource}?select=id&order=id&${query}`, token);
      assert.equal(res.status, 200, `${query}: ${res.body}`);
      const expected = await h.sql<{ id: string }>(
        `select id from ${relation} where ${resource === 'universities' ? 'id' : 'university_id'} = $1 and (${where}) order by id`,
        [university, ...params]);
      assert.deepEqual(ids(res.json), ids(expected), query);
      return expected.length;
    }

    async function someValue<T>(text: string): Promise<T> {
      const [row] = await h.sql<{ v: T }>(text, [university]);
      return row.v;
    }

    describe('1.3 operators', () => {
      test('eq, neq, gt, gte, lt, lte on numbers, text and dates', async () => {
        assert.ok(await sameRows('cohorts', 'cohorts_read', 'intake_year=eq.2021', 'intake_year = 2021') > 0);
        await sameRows('cohorts', 'cohorts_read', 'intake_year=neq.2021', 'intake_year <> 2021');
        await sameRows('cohorts', 'cohorts_read', 'intake_year=gt.2022', 'intake_year > 2022');
        await sameRows('cohorts', 'cohorts_read', 'intake_year=gte.2022&intake_year=lte.2024', 'intake_year between 2022 and 2024');
        await sameRows('cohorts', 'cohorts_read', 'end_date=lt.2024-01-01', `end_date < '2024-01-01'`);
        const name = await someValue<string>('select last_name as v from students where university_id = $1 limit 1');
        assert.ok(await sameRows('students', 'students_read', `last_name=eq.${name}`, 'last_name = $2', [name]) > 0);
      });

      test('like and ilike with * as the wildcard; match and imatch', async () => {
        assert.ok(await sameRows('students', 'students_read', 'email=like.*smith*', `email like '%smith%'`) >= 0);
        assert.ok(await sameRows('students', 'students_read', 'last_name=ilike.*A*', `last_name ilike '%a%'`) > 0);
        await sameRows('students', 'students_read', 'last_name=match.^[A-K]', `last_name ~ '^[A-K]'`);
        await sameRows('students', 'students_read', 'last_name=imatch.^[a-k]', `last_name ~* '^[a-k]'`);
      });

      test('in, including the empty list and its negation', async () => {
        await sameRows('cohorts', 'cohorts_read', 'intake_year=in.(2019,2021,2023)', 'intake_year in (2019, 2021, 2023)');
        const none = await h.get('/v1/cohorts?intake_year=in.()', token);
        assert.deepEqual(none.json, []);
        await sameRows('students', 'students_read', 'phone=not.in.()', 'true');
      });

      test('is null, not_null, true, false, unknown and isdistinct', async () => {
        assert.ok(await sameRows('students', 'students_read', 'phone=is.null', 'phone is null') > 0);
        await sameRows('students', 'students_read', 'phone=not.is.null', 'phone is not null');
        await sameRows('students', 'students_read', 'phone=is.not_null', 'phone is not null');
        await sameRows('students', 'students_read', 'is_alumni=is.true', 'is_alumni');
        await sameRows('students', 'students_read', 'is_alumni=is.FALSE', 'not is_alumni');
        await sameRows('students', 'students_read', 'is_alumni=is.unknown', 'is_alumni is unknown');
        assert.ok(await sameRows('students', 'students_read', 'is_alumni=eq.false', 'is_alumni = false') > 0);
        assert.ok(await sameRows('students', 'students_read', 'is_alumni=eq.true', 'is_alumni = true') > 0);
        const phone = await someValue<string>('select phone as v from students where university_id = $1 and phone is not null limit 1');
        await sameRows('students', 'students_read', `phone=isdistinct.${encodeURIComponent(phone)}`, 'phone is distinct from $2', [phone]);
      });

      test('full-text search: fts, plfts, phfts, wfts with a language', async () => {
        assert.ok(await sameRows('resumes', 'resumes', 'content=fts(simple).dashboard', `to_tsvector('simple', content) @@ to_tsquery('simple', 'dashboard')`) > 0);
        await sameRows('resumes', 'resumes', 'content=plfts(simple).customer analytics', `to_tsvector('simple', content) @@ plainto_tsquery('simple', 'customer analytics')`);
        await sameRows('resumes', 'resumes', 'content=phfts(simple).peer tutoring', `to_tsvector('simple', content) @@ phraseto_tsquery('simple', 'peer tutoring')`);
        await sameRows('resumes', 'resumes', 'content=wfts(simple).dashboard -python', `to_tsvector('simple', content) @@ websearch_to_tsquery('simple', 'dashboard -python')`);
        await sameRows('resumes', 'resumes', `content=fts(simple).${encodeURIComponent('dashboard & !clinical')}`, `to_tsvector('simple', content) @@ to_tsquery('simple', 'dashboard & !clinical')`);
      });

      test('cs, cd and ov on array columns, including uuid[]', async () => {
        assert.ok(await sameRows('cohorts', 'cohorts_read', 'resume_template_names=cs.{Classic}', `resume_template_names @> '{Classic}'`) > 0);
        await sameRows('cohorts', 'cohorts_read', 'resume_template_names=cd.{Classic,Modern,Academic CV}', `resume_template_names <@ '{Classic,Modern,"Academic CV"}'`);
        await sameRows('student_profiles', 'student_profiles', 'skills=ov.{Python,SQL}', `skills && '{Python,SQL}'`);
        const advisor = await someValue<string>(`select co_advisor_ids[1]::text as v from advisor_students where university_id = $1 and cardinality(co_advisor_ids) > 0 limit 1`);
        assert.ok(await sameRows('advisor_students', 'advisor_students', `co_advisor_ids=cs.{${advisor}}`, 'co_advisor_ids @> array[$2::uuid]', [advisor]) > 0);
      });

      test('the spec\'s OR group form, or=(<col>.eq.<v>,<col>=cs.{<uuid>})', async () => {
        const advisor = await someValue<string>(`select co_advisor_ids[1]::text as v from advisor_students where university_id = $1 and cardinality(co_advisor_ids) > 0 limit 1`);
        const [{ student }] = await h.sql<{ student: string }>(
          'select student_id::text as student from advisor_students where university_id = $1 and not (co_advisor_ids @> array[$2::uuid]) limit 1', [university, advisor]);
        assert.ok(await sameRows('advisor_students', 'advisor_students', `or=(student_id.eq.${student},co_advisor_ids=cs.{${advisor}})`,
          'student_id = $2::uuid or co_advisor_ids @> array[$3::uuid]', [student, advisor]) > 1);
      });

      test('range operators on columns that are not ranges answer as PostgreSQL does', async () => {
        const shift = await h.get('/v1/cohorts?intake_year=sl.2', token);
        assert.equal(shift.status, 400);
        assert.equal(shift.json.code, '42804');
        const adjacent = await h.get('/v1/cohorts?start_date=adj.(2020-01-01,2021-01-01)', token);
        assert.equal(adjacent.status, 404);
        assert.equal(adjacent.json.code, '42883');
        for (const op of ['sr', 'nxr', 'nxl']) assert.ok([400, 404].includes((await h.get(`/v1/cohorts?end_date=${op}.[2020-01-01,2021-01-01]`, token)).status), op);
      });

      test('not. negates any operator with three-valued logic', async () => {
        await sameRows('cohorts', 'cohorts_read', 'intake_year=not.gt.2022', 'not (intake_year > 2022)');
        await sameRows('students', 'students_read', 'phone=not.like.*1*', `not (phone like '%1%')`);
        await sameRows('students', 'students_read', 'is_alumni=not.is.true', 'is_alumni is not true');
      });

      test('any and all modifiers', async () => {
        await sameRows('cohorts', 'cohorts_read', 'intake_year=eq(any).{2019,2020}', `intake_year = any('{2019,2020}')`);
        await sameRows('students', 'students_read', 'email=like(all).{*a*,*e*}', `email like all('{%a%,%e%}')`);
        await sameRows('students', 'students_read', 'last_name=ilike(any).{s*,k*}', `last_name ilike any('{s%,k%}')`);
      });

      test('JSON paths in filters on jsonb and on arrays', async () => {
        assert.ok(await sameRows('student_profiles', 'student_profiles', 'sections->0->>type=eq.experience', `sections->0->>'type' = 'experience'`) > 0);
        await sameRows('student_profiles', 'student_profiles', 'skills->>0=eq.Python', `to_jsonb(skills)->>0 = 'Python'`);
      });

      test('a quoted key is a key even when it is digits, as in PostgREST: ->"0" of an array is null', async () => {
        assert.equal(await sameRows('student_profiles', 'student_profiles', 'sections->"0"->>type=eq.experience', `sections->'0'->>'type' = 'experience'`), 0);
        const res = await h.get('/v1/student_profiles?select=sections->"0"->>type,sections->"0"&order=id&limit=1', token);
        assert.deepEqual(res.json, [{ type: null, 0: null }]);
      });
    });

    describe('1.4 values, quoting and escaping', () => {
      test('quoted in-list elements keep commas, quotes and backslashes', async () => {
        const q = encodeURIComponent('("Main, North","Quote \\"Q\\" Hall","Back\\\\slash")');
        const res = await h.get(`/v1/campuses?select=name&name=in.${q}&order=name`, token);
        assert.deepEqual(res.json.map((r: any) => r.name), ['Back\\slash', 'Main, North', 'Quote "Q" Hall']);
      });
      test('a top-level value is literal: commas, parentheses and quotes are data', async () => {
        const res = await h.get(`/v1/campuses?select=name&name=eq.${encodeURIComponent('Paren (East)')}`, token);
        assert.deepEqual(res.json, [{ name: 'Paren (East)' }]);
        const quoted = await h.get(`/v1/campuses?select=name&name=eq.${encodeURIComponent('"Main, North"')}`, token);
        assert.deepEqual(quoted.json, []);
      });
      test('+ is a space, %2B a plus', async () => {
        const res = await h.get('/v1/campuses?select=name&name=eq.Main+Campus', token);
        assert.deepEqual(res.json, [{ name: 'Main Campus' }]);
      });
    });

    describe('1.8 logic trees', () => {
      test('or, and, nesting, negation; several trees and filters AND together', async () => {
        await sameRows('cohorts', 'cohorts_read', 'or=(intake_year.eq.2020,study_mode.eq.online)', `intake_year = 2020 or study_mode = 'online'`);
        await sameRows('cohorts', 'cohorts_read', 'and=(intake_year.gte.2020,or(study_mode.eq.online,study_mode.eq.hybrid))',
          `intake_year >= 2020 and (study_mode = 'online' or study_mode = 'hybrid')`);
        await sameRows('cohorts', 'cohorts_read', 'not.or=(intake_year.eq.2020,intake_year.eq.2021)', 'not (intake_year = 2020 or intake_year = 2021)');
        await sameRows('cohorts', 'cohorts_read', 'or=(intake_year.eq.2020,not.and(intake_year.gt.2021,study_mode.neq.online))',
          `intake_year = 2020 or not (intake_year > 2021 and study_mode <> 'online')`);
        await sameRows('cohorts', 'cohorts_read', 'or=(intake_year.eq.2020,intake_year.eq.2022)&or=(study_mode.eq.full_time,study_mode.eq.hybrid)&intake_year=neq.2019',
          `(intake_year = 2020 or intake_year = 2022) and (study_mode = 'full_time' or study_mode = 'hybrid') and intake_year <> 2019`);
        await sameRows('students', 'students_read', 'or=(phone.is.null,graduation_date.not.is.null)', 'phone is null or graduation_date is not null');
        await sameRows('cohorts', 'cohorts_read', 'or=(resume_template_names.cs.{Classic},intake_year.in.(2019,2020))',
          `resume_template_names @> '{Classic}' or intake_year in (2019, 2020)`);
      });
      test('quoted values in trees', async () => {
        const res = await h.get(`/v1/campuses?select=name&or=(name.eq.${encodeURIComponent('"Main, North"')},name.eq.Nowhere)`, token);
        assert.deepEqual(res.json, [{ name: 'Main, North' }]);
      });
      test('a tree naming another university\'s ids still returns only the token\'s rows', async () => {
        const [mine] = await h.sql<{ id: string }>('select id from students where university_id = $1 limit 1', [university]);
        const theirs = await h.sql<{ id: string }>('select id from students where university_id <> $1 limit 3', [university]);
        const res = await h.get(`/v1/students?select=id&or=(${[mine, ...theirs].map((s) => `id.eq.${s.id}`).join(',')})`, token);
        assert.deepEqual(ids(res.json), [mine.id]);
        const direct = await h.get(`/v1/students?select=id&id=eq.${theirs[0].id}`, token);
        assert.deepEqual(direct.json, []);
      });
    });

    describe('2 select', () => {
      test('aliases, casts from the allow-list and JSON paths', async () => {
        const res = await h.get('/v1/cohorts?select=cohort:name,year:intake_year::text,intake_term&order=name&limit=2', token);
        const expected = await h.sql<{ cohort: string; year: string; intake_term: string }>(
          'select name as cohort, intake_year::text as year, intake_term from cohorts where university_id = $1 order by name, id limit 2', [university]);
        assert.deepEqual(res.json, expected);
        const profile = await h.get('/v1/student_profiles?select=id,sections->0->>title,first:sections->0,skills->0&order=id&limit=1', token);
        const [row] = await h.sql<{ id: string; title: string; first: unknown; skills: unknown }>(
          `select id, sections->0->>'title' as title, sections->0 as first, to_jsonb(skills)->0 as skills
           from student_profiles where university_id = $1 order by id limit 1`, [university]);
        assert.deepEqual(profile.json, [row]);
        // A path ending in an index is named after its last key, as PostgREST names it, and after the column when it has none.
        const indexed = await h.get('/v1/student_profiles?select=id,sections->0->items->0,skills->1&order=id&limit=1', token);
        const [items] = await h.sql<{ id: string; items: unknown; skills: unknown }>(
          `select id, sections->0->'items'->0 as items, to_jsonb(skills)->1 as skills
           from student_profiles where university_id = $1 order by id limit 1`, [university]);
        assert.notEqual(items.items, null);
        assert.deepEqual(indexed.json, [items]);
      });
      test('a cast outside the allow-list is 42704; an unknown column 42703', async () => {
        const cast = await h.get('/v1/cohorts?select=name::regclass', token);
        assert.equal(cast.status, 400);
        assert.equal(cast.json.code, '42704');
        const unknown = await h.get('/v1/cohorts?select=name,nope', token);
        assert.equal(unknown.status, 400);
        assert.equal(unknown.json.code, '42703');
        assert.match(unknown.json.message, /cohorts\.nope/);
      });
      test('types come out in PostgreSQL\'s JSON rendering', async () => {
        const res = await h.get('/v1/jobs?select=salary_min,remote,posted_at&limit=1', token);
        const [row] = res.json;
        assert.equal(typeof row.salary_min, 'number');
        assert.equal(typeof row.remote, 'boolean');
        assert.match(row.posted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/);
      });
    });

    describe('3 order', () => {
      test('several keys, directions and null placement', async () => {
        for (const [order, sql] of [
          ['phone.desc', 'phone desc'], ['phone.asc.nullsfirst', 'phone asc nulls first'],
          ['phone.desc.nullslast,last_name', 'phone desc nulls last, last_name'], ['graduation_date.nullsfirst,id.desc', 'graduation_date nulls first, id desc'],
        ]) {
          const res = await h.get(`/v1/students?select=id&order=${order}&limit=40`, token);
          const tieBreak = order.includes('id.') ? '' : ', id';
          const expected = await h.sql<{ id: string }>(`select id from students where university_id = $1 order by ${sql}${tieBreak} limit 40`, [university]);
          assert.deepEqual(ids(res.json), ids(expected), order);
        }
      });
    });

    describe('4 pagination, Range and counts', () => {
      let total: number;
      before(async () => {
        total = (await h.sql<{ n: number }>('select count(*)::int as n from cohorts where university_id = $1', [university]))[0].n;
      });
      const exact = { prefer: 'count=exact' };

      test('the Content-Range matrix (docs/api.md, Reading)', async () => {
        const cases: [string, Record<string, string>, number, (t: number) => string][] = [
          ['', {}, 200, (t) => `0-${t - 1}/*`],
          ['limit=2&offset=2', {}, 200, () => '2-3/*'],
          ['offset=100', {}, 200, () => '*/*'],
          ['', exact, 200, (t) => `0-${t - 1}/${t}`],
          ['limit=2', exact, 206, (t) => `0-1/${t}`],
          ['offset=6&limit=10', exact, 206, (t) => `6-${t - 1}/${t}`],
          ['name=eq.none', exact, 200, () => '*/0'],
          ['limit=0', exact, 206, (t) => `*/${t}`],
          ['offset=' + 8, exact, 206, (t) => `*/${t}`],
        ];
        for (const [query, headers, status, range] of cases) {
          const res = await h.get(`/v1/cohorts?select=id&order=id&${query}`, token, headers);
          assert.equal(res.status, status, `${query} ${JSON.stringify(headers)}`);
          assert.equal(res.headers['content-range'], range(total), `${query} ${JSON.stringify(headers)}`);
        }
        assert.equal(total, 8);
      });

      test('the Range header, alone and intersected with limit and offset', async () => {
        const all = await h.sql<{ id: string }>('select id from cohorts where university_id = $1 order by id', [university]);
        const res = await h.get('/v1/cohorts?select=id&order=id', token, { range: '1-3' });
        assert.deepEqual(ids(res.json), ids(all.slice(1, 4)));
        assert.equal(res.headers['content-range'], '1-3/*');
        const both = await h.get('/v1/cohorts?select=id&order=id&offset=2', token, { range: '1-3' });
        assert.deepEqual(ids(both.json), ids(all.slice(2, 4)));
        const ignored = await h.get('/v1/cohorts?select=id&order=id', token, { range: 'items=0-1' });
        assert.equal(ignored.json.length, total);
      });

      test('416 PGRST103 past the total, for an inverted Range and a negative limit', async () => {
        const past = await h.get('/v1/cohorts?offset=9', token, exact);
        assert.equal(past.status, 416);
        assert.equal(past.json.code, 'PGRST103');
        assert.equal(past.json.details, `An offset of 9 was requested, but there are only ${total} rows.`);
        assert.equal(past.headers['content-range'], `*/${total}`);
        assert.equal((await h.get('/v1/cohorts', token, { range: '10-12', ...exact })).status, 416);
        assert.equal((await h.get('/v1/cohorts', token, { range: '5-2' })).status, 416);
        assert.equal((await h.get('/v1/cohorts?limit=-1', token)).status, 416);
      });

      test('offsets past 2^53 are taken exactly: empty up to PostgreSQL\'s bigint, 400 22003 naming the sent value beyond', async () => {
        const largest = '9223372036854775807';
        const empty = await h.get(`/v1/cohorts?select=id&offset=${largest}`, token);
        assert.deepEqual([empty.status, empty.body, empty.headers['content-range']], [200, '[]', '*/*']);
        const counted = await h.get(`/v1/cohorts?select=id&offset=${largest}`, token, exact);
        assert.equal(counted.status, 416);
        assert.equal(counted.json.details, `An offset of ${largest} was requested, but there are only ${total} rows.`);
        const ranged = await h.get('/v1/cohorts?select=id', token, { range: '9007199254740993-9007199254740999', ...exact });
        assert.equal(ranged.json.details, `An offset of 9007199254740993 was requested, but there are only ${total} rows.`);
        // Past bigint, whatever else the read asks: a count, a streamed page, a Range, CSV.
        for (const [query, headers] of [['offset=99999999999999999999', {}], ['offset=99999999999999999999', exact],
          ['offset=99999999999999999999&limit=5000', exact], ['', { range: '99999999999999999999-', ...exact }],
          ['offset=99999999999999999999', { accept: 'text/csv', ...exact }]] as const) {
          const beyond = await h.get(`/v1/cohorts?select=id&${query}`, token, headers);
          assert.deepEqual([beyond.status, beyond.json.code], [400, '22003'], `${query} ${JSON.stringify(headers)}`);
          assert.equal(beyond.json.message, 'value "99999999999999999999" is out of range for type bigint');
        }
      });

      test('planned and estimated counts give a number and echo the preference', async () => {
        for (const count of ['planned', 'estimated']) {
          const res = await h.get('/v1/students?select=id&limit=5', token, { prefer: `count=${count}` });
          assert.ok([200, 206].includes(res.status));
          assert.match(String(res.headers['content-range']), /^0-4\/\d+$/);
          assert.equal(res.headers['preference-applied'], `count=${count}`);
        }
      });

      test('HEAD answers the headers of GET with no body and no Content-Length (the body is never built)', async () => {
        const get = await h.get('/v1/cohorts?limit=3', token, exact);
        const head = await h.request({ method: 'HEAD', url: '/v1/cohorts?limit=3', headers: { authorization: `Bearer ${token}`, prefer: 'count=exact' } });
        assert.equal(head.status, get.status);
        assert.equal(head.headers['content-range'], get.headers['content-range']);
        assert.equal(head.headers['content-type'], get.headers['content-type']);
        assert.equal(head.headers['content-length'], undefined);
        assert.equal(head.body, '');
      });

      test('HEAD answers the status GET does: a cast failing on a page sent whole, an operator a streamed page\'s select or order cannot take', async () => {
        for (const url of ['/v1/students?select=email::json&limit=10', '/v1/students?select=email::json', '/v1/student_profiles?select=id&order=sections->>type->x',
          '/v1/student_profiles?select=id,t:sections->>type->x', '/v1/student_profiles?select=id,t:sections->>type->x&limit=5', '/v1/students?select=id&limit=5']) {
          const get = await h.get(url, token, exact);
          const head = await h.request({ method: 'HEAD', url, headers: { authorization: `Bearer ${token}`, prefer: 'count=exact' } });
          assert.equal(head.status, get.status, `${url}: HEAD ${head.status}, GET ${get.status} ${get.body.slice(0, 120)}`);
          assert.equal(head.body, '');
        }
      });

      test('Content-Location names the page, as PostgREST does: its path, then its parameters in key order as sent', async () => {
        const page = await h.get('/v1/students?select=id&order=id&limit=2&email=not.is.null', token);
        assert.equal(page.headers['content-location'], '/v1/students?email=not.is.null&limit=2&order=id&select=id');
        assert.equal((await h.get('/v1/cohorts', token)).headers['content-location'], '/v1/cohorts');
        const head = await h.request({ method: 'HEAD', url: '/v1/cohorts?limit=1', headers: { authorization: `Bearer ${token}` } });
        assert.equal(head.headers['content-location'], '/v1/cohorts?limit=1');
      });

      test('a streamed page (over 1,000 rows) equals the whole page and counts the same', async () => {
        const whole = await h.get('/v1/students?order=id&limit=1000', token, exact);
        const streamed = await h.get('/v1/students?order=id&limit=1001', token, exact);
        assert.equal(streamed.status, 200);
        assert.deepEqual(streamed.json, whole.json);
        assert.equal(streamed.headers['content-range'], whole.headers['content-range']);
        const partial = await h.get('/v1/students?select=id&order=id&offset=5', token, exact);
        assert.equal(partial.status, 206);
        assert.equal(partial.json.length, whole.json.length - 5);
        assert.equal(partial.headers['content-range'], `5-${whole.json.length - 1}/${whole.json.length}`);
      });

      test('keyset pagination walks every row once', async () => {
        const seen: string[] = [];
        let last: string | null = null;
        for (;;) {
          const res = await h.get(`/v1/students?select=id&order=id.asc&limit=7${last ? `&id=gt.${last}` : ''}`, token);
          if (res.json.length === 0) break;
          seen.push(...ids(res.json));
          last = res.json.at(-1).id;
        }
        const expected = await h.sql<{ id: string }>('select id from students where university_id = $1 order by id', [university]);
        assert.deepEqual(seen, ids(expected));
      });
    });

    describe('5 errors', () => {
      const cases: [string, number, string][] = [
        ['id=5', 400, 'PGRST100'],
        ['nope=bar', 400, 'PGRST100'],
        ['debug=', 400, 'PGRST100'],
        ['or=()', 400, 'PGRST100'],
        ['order=id.up', 400, 'PGRST100'],
        ['nope=eq.1', 400, '42703'],
        ['order=nope', 400, '42703'],
        ['id=eq.xyz', 400, '22P02'],
        ['graduation_date=gt.notadate', 400, '22007'],
        ['graduation_date=eq.2020-13-45', 400, '22008'],
        ['is_alumni=eq.maybe', 400, '22P02'],
        ['secondary_emails=cs.dev', 400, '22P02'],
        ['id=like.1*', 404, '42883'],
        ['cohorts.name=eq.x', 400, 'PGRST108'],
        ['cohorts.order=name', 400, 'PGRST108'],
        ['select=*,cohorts(name)', 400, 'PGRST200'],
        ['limit=-1', 416, 'PGRST103'],
      ];
      for (const [query, status, code] of cases) {
        test(`${query} → ${status} ${code}`, async () => {
          const res = await h.get(`/v1/students?${query}`, token);
          assert.equal(res.status, status, res.body);
          assert.deepEqual(Object.keys(res.json).sort(), ['code', 'details', 'hint', 'message']);
          assert.equal(res.json.code, code);
        });
      }
      test('a value out of range for an integer column is 22003', async () => {
        const res = await h.get('/v1/cohorts?intake_year=eq.99999999999', token);
        assert.equal(res.status, 400);
        assert.equal(res.json.code, '22003');
      });
      test('a key without = is ignored', async () => {
        assert.equal((await h.get('/v1/cohorts?debug', token)).status, 200);
      });
    });
  });
}
