/**
 * react-admin's PostgREST data provider (@raphiniert/ra-data-postgrest) with react-admin's own
 * HTTP client (ra-core's fetchUtils.fetchJson, the bearer token as its `user`), against the
 * listening service: getList (pagination, sort, filters, the total from Content-Range), getOne,
 * getMany and getManyReference work; its writes get a clear 4xx: create and update ask for a
 * single object back (406), updateMany sends a bare row (400), delete and deleteMany are 405.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import raDataPostgrest from '@raphiniert/ra-data-postgrest';
import { type DataProvider, HttpError, fetchUtils } from 'ra-core';
import { Harness, backends } from './support/harness.ts';

const { default: postgrestRestProvider, defaultPrimaryKeys, defaultSchema } = raDataPostgrest;

for (const backend of backends()) {
  describe(`react-admin's PostgREST provider against the service on ${backend}`, () => {
    let h: Harness;
    let university: string;
    let reader: DataProvider;
    let writer: DataProvider;

    const provider = (apiUrl: string, token: string): DataProvider => postgrestRestProvider({
      apiUrl,
      httpClient: (url: string, options: fetchUtils.Options = {}) =>
        fetchUtils.fetchJson(url, { ...options, user: { authenticated: true, token: `Bearer ${token}` } }),
      defaultListOp: 'eq',
      primaryKeys: defaultPrimaryKeys,
      schema: defaultSchema,
    });

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 120 });
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = h.app.server.address() as AddressInfo;
      const apiUrl = `http://127.0.0.1:${port}/v1`;
      university = h.demo!.universities[0].id;
      reader = provider(apiUrl, h.demo!.universities[0].read_token);
      writer = provider(apiUrl, h.demo!.universities[0].write_token);
    });
    after(() => h.close());

    test('getList: a page, sorted and filtered, with the total', async () => {
      const { data, total } = await reader.getList('students', {
        pagination: { page: 2, perPage: 3 },
        sort: { field: 'last_name', order: 'DESC' },
        filter: { is_alumni: true, 'first_name@ilike': 'a' },
      });
      const where = 'university_id = $1 and is_alumni and first_name ilike \'%a%\'';
      const expected = await h.sql<{ id: string }>(`select id from students where ${where} order by last_name desc, id offset 3 limit 3`, [university]);
      assert.deepEqual(data.map((r) => r.id), expected.map((r) => r.id));
      const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from students where ${where}`, [university]);
      assert.equal(total, n);
      assert.ok(n > 6, `the filter leaves more than two pages (${n} rows)`);
    });

    test('getList with an or filter and selected columns', async () => {
      const { data } = await reader.getList('cohorts', {
        pagination: { page: 1, perPage: 50 },
        sort: { field: 'name', order: 'ASC' },
        filter: { '@or': { 'intake_year@lte': 2019, 'intake_term@eq': 'Spring' } },
        meta: { columns: ['id', 'name', 'intake_year'] },
      });
      const expected = await h.sql<{ id: string; name: string; intake_year: number }>(
        `select id, name, intake_year from cohorts where university_id = $1 and (intake_year <= 2019 or intake_term = 'Spring') order by name, id`, [university]);
      assert.ok(expected.length > 0);
      assert.deepEqual(data, expected);
    });

    test('getOne, getMany and getManyReference', async () => {
      const students = await h.sql<{ id: string; email: string; cohort_id: string }>(
        'select id, email, cohort_id from students where university_id = $1 order by id limit 3', [university]);
      const one = await reader.getOne('students', { id: students[0].id });
      assert.equal(one.data.id, students[0].id);
      assert.equal(one.data.email, students[0].email);
      const many = await reader.getMany('students', { ids: students.map((s) => s.id) });
      assert.deepEqual(many.data.map((r) => r.id).sort(), students.map((s) => s.id).sort());
      const { data, total } = await reader.getManyReference('students', {
        target: 'cohort_id', id: students[0].cohort_id, pagination: { page: 1, perPage: 100 }, sort: { field: 'id', order: 'ASC' }, filter: {},
      });
      const expected = await h.sql<{ id: string }>('select id from students where cohort_id = $1 order by id', [students[0].cohort_id]);
      assert.deepEqual(data.map((r) => r.id), expected.map((r) => r.id));
      assert.equal(total, expected.length);
    });

    /** The HttpError a provider call fails with, and what it says. */
    async function refusal(call: Promise<unknown>): Promise<{ status: number; code: string }> {
      const error = await call.then(() => assert.fail('the call should have been refused'), (e: unknown) => e);
      assert.ok(error instanceof HttpError, String(error));
      return { status: error.status, code: (error.body as { code: string }).code };
    }

    test('writes are refused with a clear 4xx and nothing is written', async () => {
      const [student] = await h.sql<{ id: string; first_name: string }>('select id, first_name from students where university_id = $1 limit 1', [university]);
      const row = { email: 'react.admin@example.edu', first_name: 'React', last_name: 'Admin', cohort_name: 'x', is_alumni: false };
      assert.deepEqual(await refusal(writer.create('students', { data: row })), { status: 406, code: 'PGRST107' });
      assert.deepEqual(await refusal(writer.update('students', { id: student.id, data: { first_name: 'Changed' }, previousData: student })),
        { status: 406, code: 'PGRST107' });
      assert.deepEqual(await refusal(writer.updateMany('students', { ids: [student.id], data: { first_name: 'Changed' } })),
        { status: 400, code: 'INVALID_BODY' });
      assert.deepEqual(await refusal(writer.delete('students', { id: student.id, previousData: student })), { status: 405, code: 'METHOD_NOT_ALLOWED' });
      assert.deepEqual(await refusal(writer.deleteMany('students', { ids: [student.id] })), { status: 405, code: 'METHOD_NOT_ALLOWED' });
      const [after] = await h.sql<{ first_name: string }>('select first_name from students where id = $1', [student.id]);
      assert.equal(after.first_name, student.first_name);
      assert.equal((await h.sql('select 1 from students where email = $1', [row.email])).length, 0);
    });
  });
}
