/**
 * The service driven by a real client, @supabase/postgrest-js, over HTTP: the query strings
 * and headers are the client's, byte for byte.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { PostgrestClient } from '@supabase/postgrest-js';
import { Harness, storeBackends } from './support/harness.ts';

for (const backend of storeBackends()) {
  describe(`@supabase/postgrest-js against the service on ${backend}`, () => {
    let h: Harness;
    let client: PostgrestClient<any, any, any>;
    let university: string;

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 60 });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      university = h.demo!.universities[0].id;
      client = new PostgrestClient(`http://127.0.0.1:${port}/v1`, {
        headers: { Authorization: `Bearer ${h.demo!.universities[0].read_token}` },
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

    test('errors come back in PostgREST\'s shape', async () => {
      const { error, status } = await client.from('students').select('nope');
      assert.equal(status, 400);
      assert.equal(error!.code, '42703');
    });
  });
}
