/**
 * A database an older release left behind migrates forward: migrations up to 003 (before the
 * keys, policies and address register of 004_sharding.sql), data written in that schema's own
 * terms, then the remaining migrations. The students and cohorts read the same over HTTP as the
 * old schema's views answered before, every address (live, secondary, self-serve, staff and
 * erased) is in the register and refused where it must be, and new writes work. On a Citus
 * coordinator (TEST_CITUS_URL) this is the move docs/scaling.md describes: a single-node
 * database restored there is distributed by 004 with its data.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { migrate } from '../src/db/migrate.ts';
import { sha256Hex } from '../src/domain/email-register.ts';
import { issueToken } from '../src/domain/tokens.ts';
import { Harness, openTestStore, storeBackends } from './support/harness.ts';

const LAST_OLD_MIGRATION = '003_operator_lists.sql';

/** The columns of a student the old `students_read` view and the API both answer, bar the timestamps. */
const STUDENT_FIELDS = 'id,university_id,cohort_id,email,first_name,last_name,external_id,phone,graduation_date,is_alumni,account_status,secondary_emails';
const COHORT_FIELDS = 'id,university_id,name,display_name,program,degree,start_date,end_date,intake_year,intake_term,study_mode,student_count';

const ids = {
  consortium: '10000000-0000-4000-8000-000000000001',
  north: '20000000-0000-4000-8000-000000000001',
  south: '20000000-0000-4000-8000-000000000002',
  northCurrent: '30000000-0000-4000-8000-000000000001',
  northGraduated: '30000000-0000-4000-8000-000000000002',
  southCurrent: '30000000-0000-4000-8000-000000000003',
  ava: '40000000-0000-4000-8000-000000000001',
  ben: '40000000-0000-4000-8000-000000000002',
  cleo: '40000000-0000-4000-8000-000000000003',
  dan: '40000000-0000-4000-8000-000000000004',
  staff: '40000000-0000-4000-8000-000000000005',
  selfServe: '40000000-0000-4000-8000-000000000006',
  erased: '40000000-0000-4000-8000-000000000007',
};

const addresses = {
  ava: 'ava@north.example.edu', avaSecondary: 'ava.personal@mail.example', ben: 'ben@north.example.edu',
  cleo: 'cleo@south.example.edu', cleoSecondary: 'cleo.home@mail.example', dan: 'dan@south.example.edu',
  staff: 'advisor@north.example.edu', selfServe: 'someone@self.example', erased: 'gone@north.example.edu',
};

/** The data set, in the 001–003 schema: what the release before 004 wrote for these rows. */
const OLD_DATA = `
insert into consortia (id, name) values ('${ids.consortium}', 'Old Consortium');
insert into universities (id, name, short_name, consortium_id) values
  ('${ids.north}', 'North University', 'north', '${ids.consortium}'), ('${ids.south}', 'South College', 'south', null);
insert into cohorts (id, university_id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term, study_mode) values
  ('${ids.northCurrent}', '${ids.north}', 'cs-2027', 'CS 2027', 'Computer Science', 'BSc', '2023-09-01', '2027-06-30', 2023, 'Fall', 'full_time'),
  ('${ids.northGraduated}', '${ids.north}', 'cs-2021', 'CS 2021', 'Computer Science', 'BSc', '2017-09-01', '2021-06-30', 2017, 'Fall', null),
  ('${ids.southCurrent}', '${ids.south}', 'econ-2026', 'Economics 2026', 'Economics', 'BA', '2022-09-01', '2026-06-30', 2022, 'Fall', 'part_time');
insert into accounts (id, kind, university_id, email) values
  ('${ids.ava}', 'student', '${ids.north}', '${addresses.ava}'), ('${ids.ben}', 'student', '${ids.north}', '${addresses.ben}'),
  ('${ids.cleo}', 'student', '${ids.south}', '${addresses.cleo}'), ('${ids.dan}', 'student', '${ids.south}', '${addresses.dan}'),
  ('${ids.staff}', 'staff', '${ids.north}', '${addresses.staff}'), ('${ids.selfServe}', 'self_serve', null, '${addresses.selfServe}');
insert into accounts (id, kind, university_id, email, erased_at, erased_email_hash, erased_external_id_hash) values
  ('${ids.erased}', 'student', '${ids.north}', null, now(), '${sha256Hex(addresses.erased)}', '${sha256Hex('N-9')}');
insert into students (id, university_id, cohort_id, email, first_name, last_name, external_id, phone, graduation_date, is_alumni, account_status) values
  ('${ids.ava}', '${ids.north}', '${ids.northCurrent}', '${addresses.ava}', 'Ava', 'Smith', 'N-1', '+447700900001', null, false, 'claimed'),
  ('${ids.ben}', '${ids.north}', '${ids.northGraduated}', '${addresses.ben}', 'Ben', 'Okafor', 'N-2', null, '2021-06-30', true, 'invited'),
  ('${ids.cleo}', '${ids.south}', '${ids.southCurrent}', '${addresses.cleo}', 'Cleo', 'Rossi', 'S-1', null, null, false, 'invited'),
  ('${ids.dan}', '${ids.south}', null, '${addresses.dan}', 'Dan', 'Kim', null, null, null, false, 'invited');
insert into secondary_emails (email, student_id, university_id, verified_at) values
  ('${addresses.avaSecondary}', '${ids.ava}', '${ids.north}', now()), ('${addresses.cleoSecondary}', '${ids.cleo}', '${ids.south}', null);
insert into alumni_flag_history (university_id, student_id, is_alumni, reason) values
  ('${ids.north}', '${ids.ben}', false, 'cohort_enrolment'), ('${ids.north}', '${ids.ben}', true, 'graduation_date_set');
`;

for (const backend of storeBackends()) {
  describe(`a ${backend} database holding data migrates forward from ${LAST_OLD_MIGRATION}`, () => {
    let h: Harness;
    /** What the old schema's views answered for each university, before the remaining migrations. */
    const before003 = new Map<string, { students: unknown[]; cohorts: unknown[] }>();
    let applied: string[];
    const tokens = new Map<string, { read: string; write: string }>();

    before(async () => {
      const testStore = await openTestStore(backend, { migratedThrough: LAST_OLD_MIGRATION });
      const { store } = testStore;
      await store.exec(OLD_DATA);
      const viewed = (view: string, fields: string, universityId: string) => store.query<{ rows: string }>(
        `select coalesce(json_agg(r order by r.id), '[]')::text as rows from (select ${fields} from ${view} where university_id = $1) r`, [universityId]);
      for (const universityId of [ids.north, ids.south]) {
        const [students] = await viewed('students_read', STUDENT_FIELDS, universityId);
        const [cohorts] = await viewed('cohorts_read', COHORT_FIELDS, universityId);
        before003.set(universityId, { students: JSON.parse(students.rows), cohorts: JSON.parse(cohorts.rows) });
        // Tokens are issued by the old schema too: they must survive the migration.
        const [read, write] = await store.transaction(async (tx) => [
          await issueToken(tx, { universityId, canWrite: false }), await issueToken(tx, { universityId, canWrite: true })]);
        tokens.set(universityId, { read: read.token, write: write.token });
      }
      applied = await migrate(store);
      h = await Harness.over(backend, testStore);
    });
    after(() => h?.close());

    test('the remaining migrations apply, each once', () => {
      assert.ok(applied.length > 0);
      assert.ok(applied.every((file) => file > LAST_OLD_MIGRATION), applied.join(', '));
    });

    if (backend === 'citus') test('the tables holding the data are distributed by university, their rows on the shards', async () => {
      const tables = await h.sql<{ name: string; column: string }>(
        `select logicalrelid::text as name, column_to_column_name(logicalrelid, partkey) as column from pg_dist_partition
         where logicalrelid::text in ('accounts', 'students', 'cohorts', 'secondary_emails', 'alumni_flag_history') order by 1`);
      assert.deepEqual(tables.map((t) => [t.name, t.column]), [['accounts', 'university_id'], ['alumni_flag_history', 'university_id'],
        ['cohorts', 'university_id'], ['secondary_emails', 'university_id'], ['students', 'university_id']]);
      // The coordinator's own table keeps no copy of the rows moved to the shards.
      const [{ local }] = await h.sql<{ local: string }>(`select pg_relation_size('students') as local`);
      assert.equal(Number(local), 0);
    });

    test('students and cohorts read over HTTP exactly as the old views answered them', async () => {
      for (const [universityId, old] of before003) {
        const token = tokens.get(universityId)!.read;
        const students = await h.get(`/v1/students?select=${STUDENT_FIELDS}&order=id`, token);
        assert.equal(students.status, 200, students.body);
        assert.deepEqual(students.json, old.students);
        const cohorts = await h.get(`/v1/cohorts?select=${COHORT_FIELDS}&order=id`, token);
        assert.equal(cohorts.status, 200, cohorts.body);
        assert.deepEqual(cohorts.json, old.cohorts);
      }
      assert.equal(before003.get(ids.north)!.students.length, 2);
      assert.equal(before003.get(ids.south)!.students.length, 2);
    });

    test('the address register holds every address of the old data, the erased one as erased', async () => {
      const register = await h.sql<{ email_hash: string; kind: string; university_id: string | null; erased: boolean }>(
        'select email_hash, kind, university_id, erased from email_register order by email_hash');
      const expected = [
        [addresses.ava, 'student', ids.north, false], [addresses.avaSecondary, 'student', ids.north, false],
        [addresses.ben, 'student', ids.north, false], [addresses.cleo, 'student', ids.south, false],
        [addresses.cleoSecondary, 'student', ids.south, false], [addresses.dan, 'student', ids.south, false],
        [addresses.staff, 'staff', ids.north, false], [addresses.selfServe, 'self_serve', null, false],
        [addresses.erased, 'student', ids.north, true],
      ] as const;
      assert.deepEqual(register, expected
        .map(([address, kind, university_id, erased]) => ({ email_hash: sha256Hex(address), kind, university_id, erased }))
        .sort((a, b) => (a.email_hash < b.email_hash ? -1 : 1)));
    });

    test('the alumni history and the accounts without a university survive', async () => {
      const history = await h.sql<{ is_alumni: boolean; reason: string }>(
        'select is_alumni, reason from alumni_flag_history where student_id = $1 order by id', [ids.ben]);
      assert.deepEqual(history, [{ is_alumni: false, reason: 'cohort_enrolment' }, { is_alumni: true, reason: 'graduation_date_set' }]);
      const accounts = await h.admin('GET', '/accounts');
      assert.equal(accounts.status, 200, accounts.body);
      const listed = accounts.json.items.map((a: { email: string; kind: string; university_id: string | null }) => [a.email, a.kind, a.university_id]);
      assert.deepEqual(listed.sort(), [[addresses.staff, 'staff', ids.north], [addresses.selfServe, 'self_serve', null]].sort());
    });

    test('a PUT after the migration creates, updates, and refuses every address the old data holds elsewhere', async () => {
      const row = (email: string, extra: object = {}) => ({ email, first_name: 'New', last_name: 'Person', cohort_name: 'cs-2027', is_alumni: false, ...extra });
      const res = await h.request({
        method: 'PUT', url: '/v1/students',
        headers: { authorization: `Bearer ${tokens.get(ids.north)!.write}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ students: [
          row('new@north.example.edu', { external_id: 'N-3' }),
          row(addresses.ben, { first_name: 'Benjamin', last_name: 'Okafor', cohort_name: 'cs-2021', is_alumni: true, external_id: 'N-2' }),
          row(addresses.cleo), row(addresses.cleoSecondary), row(addresses.selfServe), row(addresses.staff), row(addresses.erased),
          row('fresh@north.example.edu', { external_id: 'N-9' }),
        ] }),
      });
      assert.equal(res.status, 200, res.body);
      assert.deepEqual(res.json.results.map((r: { status: string; code?: string }) => r.code ?? r.status), [
        'created', 'updated', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY',
        'EMAIL_BELONGS_TO_EXISTING_ACCOUNT', 'EMAIL_BELONGS_TO_NON_STUDENT', 'ACCOUNT_DELETED', 'ACCOUNT_DELETED',
      ]);
      const read = await h.get('/v1/students?select=email,first_name&order=email', tokens.get(ids.north)!.read);
      assert.deepEqual(read.json, [
        { email: addresses.ava, first_name: 'Ava' }, { email: addresses.ben, first_name: 'Benjamin' },
        { email: 'new@north.example.edu', first_name: 'New' },
      ]);
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from email_register where email_hash = $1', [sha256Hex('new@north.example.edu')]);
      assert.equal(n, 1);
    });
  });
}

/** A partner's batch of `resource` rows, sent with `token`. */
const sendRows = (h: Harness, token: string, method: 'PUT' | 'PATCH', resource: 'cohorts' | 'students', rows: unknown[]) => h.request({
  method, url: `/v1/${resource}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
  payload: JSON.stringify({ [resource]: rows }),
});

/** The last migration before one university's transactions had a role of their own. */
const BEFORE_TENANT_ROLE = '008_university_names.sql';

for (const backend of storeBackends()) {
  test(`a ${backend} database at ${BEFORE_TENANT_ROLE} takes the next migration on its own, and one university's writes run as pds_tenant`, async () => {
    const testStore = await openTestStore(backend, { migratedThrough: BEFORE_TENANT_ROLE });
    // First in its run, as an upgrade runs it: no setting left by an earlier file of the same run.
    assert.equal((await migrate(testStore.store))[0], '009_one_university_role.sql');
    const h = await Harness.over(backend, testStore);
    try {
      const university = (await h.admin('POST', '/universities', { name: 'Upgrade University' })).json.id as string;
      const write = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token as string;
      const send = (resource: 'cohorts' | 'students', rows: unknown[]) => sendRows(h, write, 'PUT', resource, rows);
      const cohorts = await send('cohorts', [{ name: 'up-2027', display_name: 'Up 2027', program: 'Physics', degree: 'BSc',
        start_date: '2024-09-01', end_date: '2027-06-30', intake_year: 2024, intake_term: 'Fall' }]);
      assert.equal(cohorts.status, 200, cohorts.body);
      const students = await send('students', [{ email: 'up@upgrade.example.edu', first_name: 'Up', last_name: 'Grade', cohort_name: 'up-2027', is_alumni: false }]);
      assert.deepEqual(students.json.counts, { created: 1, updated: 0, unchanged: 0, rejected: 0 }, students.body);
      const [row] = await h.db.asUniversity(university, (tx) =>
        tx.query<{ role: string; emails: string[] }>(`select current_user as role, array(select email from students) as emails`));
      assert.deepEqual({ ...row }, { role: 'pds_tenant', emails: ['up@upgrade.example.edu'] });
    } finally {
      await h.close();
    }
  });
}

/** Two universities, a write token of each (returned), and a cohort named `cohort` at both. */
async function twoUniversitiesWithCohort(h: Harness, names: readonly [string, string], cohort: string): Promise<string[]> {
  const universities = await Promise.all(names.map(async (name) => (await h.admin('POST', '/universities', { name })).json.id as string));
  const tokens = await Promise.all(universities.map(async (id) => (await h.admin('POST', '/tokens', { university_id: id, can_write: true })).json.token as string));
  const row = { name: cohort, display_name: cohort, program: 'Languages', degree: 'BA', start_date: '2024-09-01', end_date: '2027-06-30', intake_year: 2024, intake_term: 'Fall' };
  for (const token of tokens) assert.equal((await sendRows(h, token, 'PUT', 'cohorts', [row])).status, 200);
  return tokens;
}

/** The register keys `address` alone, not its older spelling `before`. */
async function assertRegisteredAs(h: Harness, address: string, before: string): Promise<void> {
  const registered = await h.store.query<{ email_hash: string }>('select email_hash from email_register where email_hash = any($1::text[])', [`{${sha256Hex(address)},${sha256Hex(before)}}`]);
  assert.deepEqual(registered.map((r) => r.email_hash), [sha256Hex(address)]);
}

/**
 * Stores a student's `address` as an older release stored it, spelled `before`: in its account
 * and student rows or as a secondary address, and as its register entry's key.
 */
async function storeAsBefore(h: Harness, address: string, before: string): Promise<void> {
  await h.store.query('update accounts set email = $2 where email = $1', [address, before]);
  await h.store.query('update students set email = $2 where email = $1', [address, before]);
  await h.store.query('update secondary_emails set email = $2 where email = $1', [address, before]);
  await h.store.query(`insert into email_register (email_hash, kind, university_id) select $2, kind, university_id from email_register where email_hash = $1`, [sha256Hex(address), sha256Hex(before)]);
  await h.store.query('delete from email_register where email_hash = $1', [sha256Hex(address)]);
}

/** The last migration before addresses were stored with Greek's final sigma as σ (014). */
const BEFORE_FINAL_SIGMA = '013_redundant_tenant_indexes.sql';

for (const backend of storeBackends()) {
  test(`a ${backend} database at ${BEFORE_FINAL_SIGMA}: an address lower-casing stored with ς is found by every spelling of it after the next migration`, async () => {
    const testStore = await openTestStore(backend, { migratedThrough: BEFORE_FINAL_SIGMA });
    const h = await Harness.over(backend, testStore);
    try {
      const [north, south] = await twoUniversitiesWithCohort(h, ['Sigma North', 'Sigma South'], 'gr-2027');
      const student = { first_name: 'Νίκος', last_name: 'Παπάς', cohort_name: 'gr-2027', is_alumni: false };
      const created = (await sendRows(h, north, 'PUT', 'students', [{ ...student, email: 'ΝΙΚΟΣ@north.example.gr' }])).json.results[0];
      assert.equal(created.status, 'created');
      // As the service stored it before: lower-cased, the final Σ as ς.
      const [folded, unfolded] = ['νικοσ@north.example.gr', 'νικος@north.example.gr'];
      await storeAsBefore(h, folded, unfolded);

      assert.equal((await migrate(testStore.store))[0], '014_greek_final_sigma.sql');
      const [stored] = await h.sql<{ email: string }>('select email from students where id = $1', [created.id]);
      assert.equal(stored.email, folded);
      await assertRegisteredAs(h, folded, unfolded);
      for (const spelling of [unfolded, folded, 'ΝΙΚΟΣ@north.example.gr']) {
        const [matched] = (await sendRows(h, north, 'PATCH', 'students', [{ email: spelling, last_name: 'Παπαδόπουλος' }])).json.results;
        assert.deepEqual([matched.status === 'rejected' ? matched.code : 'matched', matched.id], ['matched', created.id], spelling);
      }
      const [elsewhere] = (await sendRows(h, south, 'PUT', 'students', [{ ...student, email: unfolded }])).json.results;
      assert.equal(elsewhere.code, 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY');
    } finally {
      await h.close();
    }
  });
}

/** The last migration before addresses were stored with their accents composed (015). */
const BEFORE_COMPOSED_ADDRESSES = '014_greek_final_sigma.sql';

for (const backend of storeBackends()) {
  test(`a ${backend} database at ${BEFORE_COMPOSED_ADDRESSES}: an address stored with a combining accent is found by either spelling after the next migration`, async () => {
    const testStore = await openTestStore(backend, { migratedThrough: BEFORE_COMPOSED_ADDRESSES });
    const h = await Harness.over(backend, testStore);
    try {
      const [north, south] = await twoUniversitiesWithCohort(h, ['Accent North', 'Accent South'], 'es-2027');
      const student = { first_name: 'José', last_name: 'Núñez', cohort_name: 'es-2027', is_alumni: false };
      const [composed, decomposed] = ['jos\u00e9@north.example.es', 'jose\u0301@north.example.es'];
      const created = (await sendRows(h, north, 'PUT', 'students', [{ ...student, email: composed }])).json.results[0];
      assert.equal(created.status, 'created');
      // As the service stored it before: as sent, the accent a character of its own.
      await storeAsBefore(h, composed, decomposed);

      assert.equal((await migrate(testStore.store))[0], '015_composed_addresses.sql');
      const [stored] = await h.sql<{ email: string }>('select email from students where id = $1', [created.id]);
      assert.equal(stored.email, composed);
      await assertRegisteredAs(h, composed, decomposed);
      for (const [i, spelling] of [decomposed, composed].entries()) {
        const [matched] = (await sendRows(h, north, 'PATCH', 'students', [{ email: spelling, last_name: `Núñez ${i}` }])).json.results;
        assert.deepEqual([matched.status === 'rejected' ? matched.code : matched.status, matched.id], ['updated', created.id], spelling);
      }
      const [elsewhere] = (await sendRows(h, south, 'PUT', 'students', [{ ...student, email: decomposed }])).json.results;
      assert.equal(elsewhere.code, 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY');
    } finally {
      await h.close();
    }
  });
}

/** The last migration before 014 and 015 rewrote stored addresses. */
const BEFORE_REWRITTEN_ADDRESSES = '013_redundant_tenant_indexes.sql';

/** Every entry of the change feed after `since` (from the start when null), and the cursor after the last. */
async function feedSince(h: Harness, token: string, since: string | null): Promise<{ entries: { id: string; change: string; row: { email: string; secondary_emails: string[] } }[]; cursor: string }> {
  const entries = [];
  let cursor = since;
  for (;;) {
    const page = await h.get(`/v1/changes${cursor === null ? '' : `?since=${cursor}`}`, token);
    assert.equal(page.status, 200, page.body);
    entries.push(...page.json.changes);
    cursor = page.json.next_cursor;
    if (!page.json.has_more) return { entries, cursor: cursor! };
  }
}

for (const backend of storeBackends()) {
  test(`a ${backend} database at ${BEFORE_REWRITTEN_ADDRESSES}: the change feed carries every student whose address the upgrade rewrote, and no other`, async () => {
    const testStore = await openTestStore(backend, { migratedThrough: BEFORE_REWRITTEN_ADDRESSES });
    const h = await Harness.over(backend, testStore);
    try {
      const [north] = await twoUniversitiesWithCohort(h, ['Feed North', 'Feed South'], 'mix-2027');
      const student = { first_name: 'Ana', last_name: 'Ruiz', cohort_name: 'mix-2027', is_alumni: false };
      const [greek, accent, plain, withSecondary] = ['νικοσ@north.example.gr', 'jos\u00e9@north.example.es', 'plain@north.example.edu', 'sec@north.example.edu'];
      const secondary = 'ren\u00e9@home.example.fr';
      const created = (await sendRows(h, north, 'PUT', 'students', [
        { ...student, email: greek }, { ...student, email: accent }, { ...student, email: plain }, { ...student, email: withSecondary, external_id: 'S-1' },
      ])).json.results.map((r: { id: string }) => r.id);
      assert.equal((await sendRows(h, north, 'PUT', 'students', [{ ...student, email: secondary, external_id: 'S-1' }])).json.results[0].status, 'updated');
      // As an older release stored them: the final sigma as ς, accents as combining characters.
      await storeAsBefore(h, greek, 'νικος@north.example.gr');
      await storeAsBefore(h, accent, 'jose\u0301@north.example.es');
      await storeAsBefore(h, secondary, 'rene\u0301@home.example.fr');
      const { cursor } = await feedSince(h, north, null);

      await migrate(testStore.store);
      const { entries } = await feedSince(h, north, cursor);
      const byId = new Map(entries.map((entry) => [entry.id, entry]));
      assert.deepEqual([...byId.keys()].sort(), [created[0], created[1], created[3]].sort());
      assert.equal(byId.get(created[0])!.row.email, greek);
      assert.equal(byId.get(created[1])!.row.email, accent);
      assert.deepEqual(byId.get(created[3])!.row.secondary_emails, [secondary]);
      assert.ok(entries.every((entry) => entry.change === 'updated'));
    } finally {
      await h.close();
    }
  });
}
