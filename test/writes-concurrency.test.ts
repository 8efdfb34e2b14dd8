/**
 * Concurrency and faults on a PostgreSQL server and on Citus (PGlite is one session):
 * overlapping batches never duplicate or lose an update, a race lost to another university is
 * decided again, and on PostgreSQL a batch cut off by a dropped connection leaves nothing
 * behind and converges on replay (the fault is a trigger, which Citus does not run on shards).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { Harness, storeBackends } from './support/harness.ts';

for (const backend of storeBackends().filter((b) => b !== 'pglite')) {
  describe(`batch writes under concurrency and faults on ${backend}`, () => {
    let h: Harness;
    let token: string;
    let otherUniversity: string;

    const put = (rows: unknown[], method: 'PUT' | 'PATCH' = 'PUT') => h.request({
      method, url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify({ students: rows }),
    });
    const students = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({
      email: `${tag}.${i}@race.example.edu`, first_name: 'R', last_name: `Row ${i}`, cohort_name: 'race-2025', is_alumni: false,
    }));

    before(async () => {
      h = await Harness.start(backend);
      const university = (await h.admin('POST', '/universities', { name: 'Race University' })).json.id;
      otherUniversity = (await h.admin('POST', '/universities', { name: 'Other University' })).json.id;
      token = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      await h.admin('POST', '/cohorts', {
        university_id: university, name: 'race-2025', display_name: 'Race', program: 'P', degree: 'BSc',
        start_date: '2025-09-01', end_date: '2028-06-30', intake_year: 2025, intake_term: 'Fall',
      });
    });
    after(() => h.close());

    test('two clients putting the same new students at once create each exactly once', async () => {
      const rows = students('overlap', 120);
      const [a, b] = await Promise.all([put(rows), put([...rows].reverse())]);
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal(a.json.counts.created + b.json.counts.created, 120);
      assert.equal(a.json.counts.unchanged + b.json.counts.unchanged, 120);
      const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from students where email like 'overlap.%'`);
      assert.equal(n, 120);
    });

    test('concurrent PATCHes of different fields of the same students lose neither update', async () => {
      const rows = students('both', 60);
      await put(rows);
      const [names, phones] = await Promise.all([
        put(rows.map((r) => ({ email: r.email, last_name: 'Renamed' })), 'PATCH'),
        put(rows.map((r, i) => ({ email: r.email, phone: `+4477009${String(i).padStart(5, '0')}` })), 'PATCH'),
      ]);
      assert.equal(names.json.counts.updated, 60);
      assert.equal(phones.json.counts.updated, 60);
      const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from students where email like 'both.%' and last_name = 'Renamed' and phone is not null`);
      assert.equal(n, 60);
    });

    test('an address taken by another university while the batch waits is decided again', async () => {
      const rows = students('taken', 3);
      const racer = postgres(h.testStore.url!, { max: 1, onnotice: () => {} });
      const conn = await racer.reserve();
      await conn.unsafe('begin');
      // What another university's batch does: claim the address in the register, then create the account.
      await conn.unsafe(`insert into email_register (email_hash, kind, university_id)
        values (encode(sha256(convert_to($2::text, 'UTF8')), 'hex'), 'student', $1)`, [otherUniversity, rows[1].email]);
      await conn.unsafe(`insert into accounts (kind, university_id, email) values ('student', $1, $2)`, [otherUniversity, rows[1].email]);
      const pending = put(rows);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await conn.unsafe('commit');
      conn.release();
      await racer.end();
      const res = await pending;
      assert.equal(res.status, 200);
      assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['created', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY', 'created']);
    });

    if (backend === 'postgres') test('a batch cut off by a dropped connection writes nothing, and its replay converges', async () => {
      await h.store.exec(`
        create function pds_test_drop_connection() returns trigger language plpgsql security definer as $$
        begin
          if new.first_name = 'Crash' then perform pg_terminate_backend(pg_backend_pid()); end if;
          return new;
        end $$;
        create trigger pds_test_drop_connection before insert on students for each row execute function pds_test_drop_connection();`);
      const rows = students('fault', 5).map((r, i) => (i === 3 ? { ...r, first_name: 'Crash' } : r));
      const cut = await put(rows);
      assert.equal(cut.status, 503);
      assert.deepEqual(Object.keys(cut.json).sort(), ['code', 'details', 'hint', 'message']);
      const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from accounts where email like 'fault.%'`);
      assert.equal(n, 0);
      await h.store.exec('drop trigger pds_test_drop_connection on students; drop function pds_test_drop_connection()');
      const replay = await put(rows);
      assert.equal(replay.status, 200);
      assert.equal(replay.json.counts.created, 5);
      assert.equal((await put(rows)).json.counts.unchanged, 5);
    });
  });
}
