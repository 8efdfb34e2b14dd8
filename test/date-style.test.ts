/**
 * A database whose sessions render dates in another DateStyle than ISO (`SQL, DMY`: 30/06/2024),
 * set for the database or the session, as an administrator may: the service's rules compare
 * stored dates as `YYYY-MM-DD` text, and under that style a PATCH stored an inverted date range,
 * every replay of a student with a graduation date was `updated`, and a move into a past cohort
 * derived `is_alumni: false`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { Harness, type TestStore, openTestStore, storeBackends } from './support/harness.ts';

const NON_ISO_DATE_STYLE = 'SQL, DMY';

/** A migrated store whose sessions start in NON_ISO_DATE_STYLE. */
async function storeWithDateStyle(backend: ReturnType<typeof storeBackends>[number]): Promise<TestStore> {
  const base = await openTestStore(backend);
  if (backend === 'pglite') {
    // One session, whose default this sets.
    await base.store.exec(`set datestyle = '${NON_ISO_DATE_STYLE}'`);
    return base;
  }
  const name = new URL(base.url!).pathname.slice(1);
  await base.store.exec(`alter database "${name}" set datestyle = '${NON_ISO_DATE_STYLE}'`);
  // Sessions opened from now on start in that style.
  const store = openPostgresStore(base.url!, 10);
  return {
    store,
    url: base.url,
    async drop() {
      await store.close();
      await base.drop();
    },
  };
}

const PAST = { name: 'past', display_name: 'Past', program: 'History', degree: 'BA', start_date: '2020-09-01', end_date: '2024-06-30', intake_year: 2020, intake_term: 'Fall' };
const FUTURE = { ...PAST, name: 'future', display_name: 'Future', start_date: '2025-09-01', end_date: '2999-06-30', intake_year: 2025 };
/** Ended as PAST did, and left alone: the PATCH of PAST's end date, refused now, once moved it to 2020. */
const ENDED = { ...PAST, name: 'ended', display_name: 'Ended' };

for (const backend of storeBackends()) {
  describe(`dates under DateStyle ${NON_ISO_DATE_STYLE} on ${backend}`, () => {
    let h: Harness;
    let token: string;

    const write = async (method: 'PUT' | 'PATCH', resource: 'students' | 'cohorts', rows: unknown[]) => {
      const res = await h.request({
        method, url: `/v1/${resource}`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ [resource]: rows }),
      });
      assert.equal(res.status, 200, res.body);
      return res.json.results[0];
    };

    before(async () => {
      h = await Harness.over(backend, await storeWithDateStyle(backend));
      const university = (await h.admin('POST', '/universities', { name: 'Datestyle University' })).json.id;
      token = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      for (const cohort of [PAST, FUTURE, ENDED]) assert.equal((await write('PUT', 'cohorts', [cohort])).status, 'created');
    });
    after(() => h?.close());

    test('a PATCH sending one date is checked against the stored one', async () => {
      const result = await write('PATCH', 'cohorts', [{ name: 'past', end_date: '2020-08-01' }]);
      assert.equal(result.code, 'INVALID_DATE_RANGE', JSON.stringify(result));
      const [cohort] = (await h.get('/v1/cohorts?name=eq.past&select=start_date,end_date', token)).json;
      assert.deepEqual(cohort, { start_date: '2020-09-01', end_date: '2024-06-30' });
    });

    test('a replay of a student with a graduation date is unchanged', async () => {
      const row = { email: 'dated@datestyle.example.edu', first_name: 'Ada', last_name: 'Byron', cohort_name: 'future', is_alumni: true, graduation_date: '2023-05-01' };
      assert.equal((await write('PUT', 'students', [row])).status, 'created');
      assert.equal((await write('PUT', 'students', [row])).status, 'unchanged');
    });

    test('a move into a cohort that ended derives is_alumni from its end date', async () => {
      const email = 'mover@datestyle.example.edu';
      const created = await write('PUT', 'students', [{ email, first_name: 'Mo', last_name: 'Ver', cohort_name: 'future', is_alumni: false }]);
      assert.equal(created.status, 'created');
      assert.equal((await write('PATCH', 'students', [{ email, cohort_name: 'ended' }])).status, 'updated');
      const [student] = (await h.get(`/v1/students?email=eq.${email}&select=is_alumni`, token)).json;
      assert.equal(student.is_alumni, true);
      const { history } = (await h.admin('GET', `/students/${created.id}/alumni-history`)).json;
      assert.deepEqual(history.map((entry: { is_alumni: boolean; reason: string }) => [entry.is_alumni, entry.reason]).at(-1), [true, 'cohort_move']);
    });

    test('a sign-in derives is_alumni from the end date of a cohort that ended', async () => {
      const email = 'signin@datestyle.example.edu';
      const created = await write('PUT', 'students', [{ email, first_name: 'Si', last_name: 'Gnin', cohort_name: 'ended', is_alumni: false }]);
      assert.equal((await h.admin('POST', `/students/${created.id}/sign-in`)).status, 200);
      const [student] = (await h.get(`/v1/students?email=eq.${email}&select=is_alumni`, token)).json;
      assert.equal(student.is_alumni, true);
    });

    test('a CSV page writes dates in ISO form', async () => {
      const res = await h.get('/v1/cohorts?name=eq.future&select=name,start_date,end_date', token, { accept: 'text/csv' });
      assert.equal(res.status, 200, res.body);
      assert.equal(res.body, 'name,start_date,end_date\r\nfuture,2025-09-01,2999-06-30\r\n');
    });
  });
}
