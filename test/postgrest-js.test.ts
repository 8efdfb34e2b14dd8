/**
 * The service driven by a real client, @supabase/postgrest-js, over HTTP: the query strings
 * and headers are the client's, byte for byte. Reads work, `.csv()` included; `.delete()` is 405,
 * `.explain()` 406, and insert/upsert/update send bare rows, not the batch envelope: 400.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { PostgrestClient } from '@supabase/postgrest-js';
import { assertCsvEqualsJson } from './support/csv.ts';
import { Harness, storeBackends } from './support/harness.ts';

for (const backend of storeBackends()) {
  describe(`@supabase/postgrest-js against the service on ${backend}`, () => {
    let h: Harness;
    let client: PostgrestClient<any, any, any>;
    let writer: PostgrestClient<any, any, any>;
    let baseUrl: string;
    let university: string;
    /** The last answer the clients got, for the headers postgrest-js does not pass on. */
    let lastResponse: globalThis.Response;
    const recordingFetch: typeof fetch = async (input, init) => (lastResponse = await fetch(input, init));

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 60 });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      university = h.demo!.universities[0].id;
      baseUrl = `http://127.0.0.1:${port}/v1`;
      client = new PostgrestClient(baseUrl, {
        headers: { Authorization: `Bearer ${h.demo!.universities[0].read_token}` }, fetch: recordingFetch,
      });
      writer = new PostgrestClient(baseUrl, {
        headers: { Authorization: `Bearer ${h.demo!.universities[0].write_token}` }, fetch: recordingFetch,
      });
    });
    after(() => h.close());

    const expectedIds = async (where: string, params: string[] = [], order = 'id', limit = 1000) =>
      (await h.sql<{ id: string }>(`select id from students_read where university_id = $1 and (${where}) order by ${order} limit ${limit}`,
        [university, ...params])).map((r) => r.id);

    test('select with eq and order', async () => {
      const [{ last_name }] = await h.sql<{ last_name: string }>('select last_name from students where university_id = $1 limit 1', [university]);
      const { data, error, status } = await client.from('students').select('id, last_name').eq('last_name', last_name).order('id');
      assert.equal(error, null);
      assert.equal(status, 200);
      assert.deepEqual(data!.map((r: any) => r.id), await expectedIds('last_name = $2', [last_name]));
    });

    test('in, ilike, gte and lte', async () => {
      const { data, error } = await client.from('cohorts').select('id').in('intake_year', [2019, 2021]).ilike('program', '%s%').order('id');
      assert.equal(error, null);
      const expected = await h.sql<{ id: string }>(
        `select id from cohorts where university_id = $1 and intake_year in (2019, 2021) and program ilike '%s%' order by id`, [university]);
      assert.deepEqual(data!.map((r: any) => r.id), expected.map((r) => r.id));
      const range = await client.from('cohorts').select('id').gte('intake_year', 2020).lte('intake_year', 2022).order('id');
      const expectedRange = await h.sql<{ id: string }>(
        'select id from cohorts where university_id = $1 and intake_year between 2020 and 2022 order by id', [university]);
      assert.deepEqual(range.data!.map((r: any) => r.id), expectedRange.map((r) => r.id));
    });

    // Reported in an audit: postgrest-js quotes only values holding `,()`, so a value starting with
    // a quote went out as `in.("Bob,…)`, which the service refused (400) and PostgREST reads as text.
    test('in() with a value that starts with a quote', async () => {
      const [{ last_name }] = await h.sql<{ last_name: string }>('select last_name from students where university_id = $1 order by id limit 1', [university]);
      const { data, error } = await client.from('students').select('id').in('last_name', ['"Bob', last_name]).order('id');
      assert.equal(error, null);
      assert.deepEqual(data!.map((r: any) => r.id), await expectedIds(`last_name in ('"Bob', $2)`, [last_name]));
    });

    test('or and not', async () => {
      const { data, error } = await client.from('students').select('id').or('phone.is.null,is_alumni.eq.true').not('graduation_date', 'is', null).order('id');
      assert.equal(error, null);
      assert.deepEqual(data!.map((r: any) => r.id), await expectedIds('(phone is null or is_alumni) and graduation_date is not null'));
    });

    test('contains on an array column and full-text search', async () => {
      const cohorts = await client.from('cohorts').select('id').contains('resume_template_names', ['Classic']).order('id');
      const expected = await h.sql<{ id: string }>(`select id from cohorts where university_id = $1 and resume_template_names @> '{Classic}' order by id`, [university]);
      assert.deepEqual(cohorts.data!.map((r: any) => r.id), expected.map((r) => r.id));
      const resumes = await client.from('resumes').select('id').textSearch('content', 'dashboard', { config: 'simple', type: 'websearch' }).order('id');
      const expectedResumes = await h.sql<{ id: string }>(
        `select id from resumes where university_id = $1 and to_tsvector('simple', content) @@ websearch_to_tsquery('simple', 'dashboard') order by id`, [university]);
      assert.equal(resumes.error, null);
      assert.deepEqual(resumes.data!.map((r: any) => r.id), expectedResumes.map((r) => r.id));
    });

    test('range with an exact count', async () => {
      const { data, count, status, error } = await client.from('students').select('id', { count: 'exact' }).order('last_name').order('id').range(5, 9);
      assert.equal(error, null);
      assert.equal(status, 206);
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from students where university_id = $1', [university]);
      assert.equal(count, n);
      assert.deepEqual(data!.map((r: any) => r.id), (await expectedIds('true', [], 'last_name, id', 10)).slice(5));
    });

    test('head with a count', async () => {
      const { count, data, error } = await client.from('cohorts').select('*', { count: 'exact', head: true });
      assert.equal(error, null);
      assert.equal(data, null);
      assert.equal(count, 8);
    });

    test('single() gives one object; several rows are 406 PGRST116; maybeSingle() of none is null', async () => {
      const [student] = await h.sql<{ id: string; email: string }>('select id, email from students where university_id = $1 limit 1', [university]);
      const one = await client.from('students').select('id, email').eq('id', student.id).single();
      assert.equal(one.error, null);
      assert.deepEqual(one.data, student);
      const many = await client.from('students').select('id').limit(5).single();
      assert.equal(many.status, 406);
      assert.equal(many.error!.code, 'PGRST116');
      assert.equal(many.error!.details, 'The result contains 5 rows');
      const none = await client.from('students').select('id').eq('email', 'nobody@nowhere.example').maybeSingle();
      assert.deepEqual([none.data, none.error], [null, null]);
    });

    test('single() with a count carries the total in Content-Range, as any page does', async () => {
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from cohorts where university_id = $1', [university]);
      const first = await client.from('cohorts').select('name', { count: 'exact' }).order('name').limit(1).single();
      assert.equal(first.error, null);
      assert.equal(typeof (first.data as { name: string }).name, 'string');
      assert.equal(first.count, n);
      assert.equal(first.status, 206);
      assert.equal(lastResponse.headers.get('content-range'), `0-0/${n}`);
      const [{ id }] = await h.sql<{ id: string }>('select id from cohorts where university_id = $1 limit 1', [university]);
      const only = await client.from('cohorts').select('name', { count: 'exact' }).eq('id', id).single();
      assert.deepEqual([only.status, only.count, lastResponse.headers.get('content-range')], [200, 1, '0-0/1']);
    });

    test('stripNulls() leaves out null members, of a page and of a single object, and says so in Content-Type', async () => {
      const columns = 'id, email, phone, graduation_date, external_id';
      const full = await client.from('students').select(columns).order('id').limit(20);
      assert.equal(full.error, null);
      const withoutNulls = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).filter(([, value]) => value !== null));
      assert.ok(full.data!.some((row: Record<string, unknown>) => Object.values(row).includes(null)), 'the page has nulls to strip');
      const stripped = await client.from('students').select(columns).order('id').limit(20).stripNulls();
      assert.equal(stripped.error, null);
      assert.equal(lastResponse.headers.get('content-type'), 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8');
      assert.deepEqual(stripped.data, full.data!.map(withoutNulls));
      const one = full.data!.find((row: Record<string, unknown>) => Object.values(row).includes(null)) as { id: string };
      const single = await client.from('students').select(columns).eq('id', one.id).single().stripNulls();
      assert.equal(single.error, null);
      assert.equal(lastResponse.headers.get('content-type'), 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8');
      assert.deepEqual(single.data, withoutNulls(one));
      const streamed = await client.from('students').select(columns).order('id').limit(1001).stripNulls();
      assert.equal(streamed.error, null);
      assert.deepEqual(streamed.data!.slice(0, 20), full.data!.map(withoutNulls));
      assert.ok(streamed.data!.every((row: Record<string, unknown>) => !Object.values(row).includes(null)));
    });

    test('schema(): public reads as without it; any other schema is 406 PGRST106, read or write', async () => {
      const publicRead = await client.schema('public').from('cohorts').select('id').limit(1);
      assert.deepEqual([publicRead.status, publicRead.error], [200, null]);
      const other = await client.schema('private').from('cohorts').select('id').limit(1);
      assert.equal(other.status, 406);
      assert.deepEqual(other.error, { code: 'PGRST106', message: 'The schema must be one of the following: public', details: null, hint: null });
      const write = await h.request({
        method: 'PUT', url: '/v1/cohorts', payload: { cohorts: [] },
        headers: { authorization: `Bearer ${h.demo!.universities[0].write_token}`, 'content-type': 'application/json', 'content-profile': 'private' },
      });
      assert.deepEqual([write.status, write.json.code], [406, 'PGRST106']);
      const head = await h.request({ method: 'HEAD', url: '/v1/cohorts', headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}`, 'accept-profile': 'private' } });
      assert.equal(head.status, 406);
      const publicWrite = await h.request({
        method: 'PUT', url: '/v1/cohorts', payload: { cohorts: [] },
        headers: { authorization: `Bearer ${h.demo!.universities[0].write_token}`, 'content-type': 'application/json', 'content-profile': 'public', 'accept-profile': 'private' },
      });
      assert.equal(publicWrite.status, 200, publicWrite.body);
      const noToken = await h.request({ method: 'GET', url: '/v1/cohorts', headers: { 'accept-profile': 'private' } });
      assert.equal(noToken.status, 401);
    });

    test('rpc() is 404 PGRST202, as PostgREST answers for a function it lacks: the service offers none', async () => {
      for (const get of [true, false]) {
        const { status, error } = await client.rpc('some_function', { a: 1 }, { get });
        assert.equal(status, 404);
        assert.equal(error!.code, 'PGRST202');
        assert.equal(error!.message, 'Could not find the function public.some_function in the schema cache');
      }
    });

    test('errors come back in PostgREST\'s shape', async () => {
      const { error, status } = await client.from('students').select('nope');
      assert.equal(status, 400);
      assert.equal(error!.code, '42703');
    });

    test('csv() is the CSV of what select() returns, header in select order', async () => {
      const columns = 'id, mail:email, first_name, graduation_date, is_alumni, secondary_emails, created_at';
      const json = await client.from('students').select(columns).order('id').limit(40);
      assert.equal(json.error, null);
      const csv = await client.from('students').select(columns).order('id').limit(40).csv();
      assert.equal(csv.error, null);
      assert.equal(csv.status, 200);
      assert.equal(lastResponse.headers.get('content-type'), 'text/csv; charset=utf-8');
      assert.equal(typeof csv.data, 'string');
      assertCsvEqualsJson(csv.data as unknown as string, json.data as Record<string, unknown>[], columns.split(', ').map((c) => c.split(':')[0]));
    });

    test('csv() with a count and a range: 206, Content-Range as for JSON', async () => {
      const csv = await client.from('cohorts').select('name', { count: 'exact' }).order('name').range(0, 2).csv();
      assert.equal(csv.status, 206);
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from cohorts where university_id = $1', [university]);
      assert.equal(csv.count, n);
      assert.equal((csv.data as unknown as string).split('\r\n').length, 1 + 3 + 1);
    });

    test('delete() is 405 with Allow, whatever it sends', async () => {
      const [student] = await h.sql<{ id: string }>('select id from students where university_id = $1 limit 1', [university]);
      const { error, status } = await writer.from('students').delete().eq('id', student.id);
      assert.equal(status, 405);
      assert.equal(error!.code, 'METHOD_NOT_ALLOWED');
      assert.equal(lastResponse.headers.get('allow'), 'GET, HEAD, POST, PUT, PATCH');
      const readOnly = await writer.from('campuses').delete().eq('id', student.id);
      assert.equal(readOnly.status, 405);
      assert.equal(lastResponse.headers.get('allow'), 'GET, HEAD');
      assert.equal((await h.sql('select 1 from students where id = $1', [student.id])).length, 1);
    });

    test('insert, upsert and update send bare rows, not the batch envelope: 400 INVALID_BODY, nothing written', async () => {
      const row = { email: 'bare.row@example.edu', first_name: 'Bare', last_name: 'Row', cohort_name: 'x', is_alumni: false };
      const [student] = await h.sql<{ id: string }>('select id from students where university_id = $1 limit 1', [university]);
      for (const [call, response] of [
        ['insert', await writer.from('students').insert(row)],
        ['insert of several', await writer.from('students').insert([row, row])],
        ['upsert', await writer.from('students').upsert(row)],
        ['update', await writer.from('students').update({ first_name: 'Changed' }).eq('id', student.id)],
      ] as const) {
        assert.equal(response.status, 400, call);
        assert.equal(response.error!.code, 'INVALID_BODY', call);
        assert.match(response.error!.message, /"students"/, call);
      }
      assert.equal((await h.sql('select 1 from students where email = $1', [row.email])).length, 0);
      assert.equal((await h.sql('select 1 from students where first_name = $1', ['Changed'])).length, 0);
    });

    test('explain() is 406 PGRST107: the service has no plans to show', async () => {
      const { error, status } = await client.from('students').select('id').explain();
      assert.equal(status, 406);
      assert.equal(error!.code, 'PGRST107');
      assert.match(error!.message, /application\/vnd\.pgrst\.plan/);
    });

    test('from a browser origin: the CORS headers are there, and the preflight is answered without a token', async () => {
      const browser = new PostgrestClient(baseUrl, {
        headers: { Authorization: `Bearer ${h.demo!.universities[0].read_token}`, Origin: 'https://partner-app.example' }, fetch: recordingFetch,
      });
      const { error, count } = await browser.from('students').select('id', { count: 'exact' }).limit(1);
      assert.equal(error, null);
      assert.ok(count! > 0);
      assert.equal(lastResponse.headers.get('access-control-allow-origin'), '*');
      assert.match(lastResponse.headers.get('access-control-expose-headers')!, /Content-Range/);
      const preflight = await fetch(`${baseUrl}/students?select=id`, {
        method: 'OPTIONS',
        headers: { Origin: 'https://partner-app.example', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'authorization,accept,prefer' },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
      assert.match(preflight.headers.get('access-control-allow-headers')!, /authorization/i);
    });
  });
}
