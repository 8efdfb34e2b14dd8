/**
 * Hostile input through HTTP: one bad string sinks only its own row; a deadlock or a lost race
 * never fails a batch; the operator API refuses what it cannot store or keep true, and says
 * which reference is missing.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { inSavepoint } from '../src/db/savepoint.ts';
import { Harness, backends } from './support/harness.ts';

const COHORT = {
  name: 'cs-2025', display_name: 'Computer Science 2025', program: 'Computer Science', degree: 'BSc',
  start_date: '2025-09-01', end_date: '2999-06-30', intake_year: 2025, intake_term: 'Fall',
};
const ERROR_KEYS = ['code', 'details', 'hint', 'message'];

for (const backend of backends()) {
  describe(`hostile writes on ${backend}`, () => {
    let h: Harness;
    let university: string;
    let token: string;
    let serial = 0;

    const send = (method: 'PUT' | 'POST' | 'PATCH', resource: 'students' | 'cohorts', rows: unknown[]) =>
      h.request({ method, url: `/v1/${resource}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify({ [resource]: rows }) });
    const student = (overrides: Record<string, unknown> = {}) => ({
      email: `hostile.${++serial}@bayview.example.edu`, first_name: 'Ada', last_name: 'Lovelace', cohort_name: COHORT.name, is_alumni: false, ...overrides,
    });
    const count = async (where: string, params: string[]) =>
      (await h.sql<{ n: number }>(`select count(*)::int as n from students where ${where}`, params))[0].n;

    before(async () => {
      h = await Harness.start(backend);
      university = (await h.admin('POST', '/universities', { name: 'Bayview University', short_name: 'bayview' })).json.id;
      token = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      assert.equal((await send('PUT', 'cohorts', [COHORT])).json.counts.created, 1);
    });
    after(() => h.close());

    describe('one bad string rejects its own row only', () => {
      test('a NUL and a 3,200-character external_id are INVALID_FIELD, naming the field; the other rows are written', async () => {
        const rows = [student(), student({ first_name: 'a\u0000b' }), student({ external_id: 'x'.repeat(3200) }), student({ cohort_name: 'cs\u00002025' }), student()];
        const res = await send('PUT', 'students', rows);
        assert.equal(res.status, 200, res.body);
        assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['created', 'INVALID_FIELD', 'INVALID_FIELD', 'INVALID_FIELD', 'created']);
        assert.match(res.json.results[1].message, /^first_name /);
        assert.match(res.json.results[2].message, /^external_id must be at most 100 characters/);
        assert.match(res.json.results[3].message, /^cohort_name /);
        assert.equal(await count('email = any($1::text[])', [`{${rows.map((r) => r.email).join(',')}}`]), 2);
        // A retry of the same batch converges instead of looping on an error.
        assert.deepEqual((await send('PUT', 'students', rows)).json.counts, { created: 0, updated: 0, unchanged: 2, rejected: 3 });
      });

      test('a NUL in an email is INVALID_EMAIL for that row only', async () => {
        const res = await send('PATCH', 'students', [{ email: 'a\u0000b@bayview.example.edu', last_name: 'X' }, { email: `hostile.1@bayview.example.edu`, last_name: 'Byron' }]);
        assert.equal(res.status, 200, res.body);
        assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['INVALID_EMAIL', 'updated']);
      });

      test('cohort rows: control characters and over-long strings in any field reject that row', async () => {
        const rows = [
          { ...COHORT, name: 'ok-1' },
          { ...COHORT, name: 'nul-display', display_name: 'a\u0000b' },
          { ...COHORT, name: 'long-program', program: 'p'.repeat(3200) },
          { ...COHORT, name: 'nul-template', resume_template_names: ['a\u0000b'] },
          { ...COHORT, name: 'n\u0000ul' },
          { ...COHORT, name: 'ok-2' },
        ];
        const res = await send('PUT', 'cohorts', rows);
        assert.equal(res.status, 200, res.body);
        assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['created', 'INVALID_FIELD', 'INVALID_FIELD', 'INVALID_FIELD', 'INVALID_NAME', 'created']);
        assert.match(res.json.results[1].message, /^display_name /);
        assert.match(res.json.results[2].message, /^program must be at most 200 characters/);
        assert.match(res.json.results[3].message, /^resume_template_names\[0\] /);
      });
    });

    // Reported in an audit: a row of 340,000 made-up fields held the event loop 0.5–0.7 s, and a
    // 4 MB email came back whole; either answer was kept a day for an Idempotency-Key.
    describe('what a batch can make its answer hold', () => {
      test('more than 200 distinct field names, or a name of more than 100 characters, refuse the batch: 400, nothing written', async () => {
        const fields = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`extra_${i}`, 1]));
        const others = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`other_${i}`, 1]));
        const rows = [student(fields), student(others)];
        for (const batch of [rows, [student({ ['x'.repeat(101)]: 1 })]]) {
          const res = await send('PUT', 'students', batch);
          assert.deepEqual([res.status, res.json.code], [400, 'INVALID_BODY'], res.body);
        }
        assert.equal(await count('email = any($1::text[])', [`{${rows.map((r) => r.email).join(',')}}`]), 0);
        const fine = await send('PUT', 'students', [student(fields), student({ ['y'.repeat(100)]: 1 })]);
        assert.equal(fine.status, 200, fine.body);
        assert.equal(fine.json.dropped_fields.length, 102);
      });

      test('a result echoes at most 1,000 characters of a row\'s email or name', async () => {
        const padded = student();
        const students = await send('PUT', 'students', [{ ...student(), email: `${'x'.repeat(5_000)}@bayview.example.edu` }, { ...padded, email: `${' '.repeat(2_000)}${padded.email}` }]);
        assert.equal(students.status, 200, students.body);
        assert.deepEqual(students.json.results.map((r: any) => [r.code ?? r.status, r.email]), [
          ['INVALID_EMAIL', `${'x'.repeat(1_000)}…`], ['created', `${' '.repeat(1_000)}…`]]);
        const cohorts = await send('PUT', 'cohorts', [{ ...COHORT, name: 'c'.repeat(5_000) }]);
        assert.deepEqual(cohorts.json.results.map((r: any) => [r.code, r.name]), [['INVALID_NAME', `${'c'.repeat(1_000)}…`]]);
      });
    });

    describe('an unpaired surrogate, which UTF-8 cannot store, rejects its own row, so a replay answers as the first call', () => {
      // JSON carries a lone `\ud800`; stored, it became U+FFFD, and the row no longer matched what it wrote.
      test('student rows: INVALID_EMAIL or INVALID_FIELD naming the field, on a PUT and on its replay; the valid row is written once', async () => {
        const rows = [
          student({ email: `lone.${++serial}\ud800@bayview.example.edu` }), student({ external_id: 'E\udfff' }), student({ first_name: 'A\ud800' }), student(),
        ];
        for (const last of ['created', 'unchanged']) {
          const res = await send('PUT', 'students', rows);
          assert.equal(res.status, 200, res.body);
          assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['INVALID_EMAIL', 'INVALID_FIELD', 'INVALID_FIELD', last]);
          assert.match(res.json.results[1].message, /^external_id .*unpaired surrogate/);
          assert.match(res.json.results[2].message, /^first_name .*unpaired surrogate/);
        }
        // Nothing stored of the three rows, U+FFFD in place of the surrogate or not.
        assert.equal(await count('first_name = $1 or external_id = $2 or email like $3', ['A\ufffd', 'E\ufffd', 'lone.%']), 0);
      });

      test('cohort rows: a name holding one is INVALID_NAME on every PUT and POST, and no cohort of that name is created', async () => {
        for (const method of ['PUT', 'PUT', 'POST'] as const) {
          const res = await send(method, 'cohorts', [{ ...COHORT, name: 'sur\ud800c' }, { ...COHORT, name: 'sur-ok', display_name: 'D\udc00' }]);
          assert.equal(res.status, 200, res.body);
          assert.deepEqual(res.json.results.map((r: any) => r.code), ['INVALID_NAME', 'INVALID_FIELD']);
          assert.match(res.json.results[1].message, /^display_name .*unpaired surrogate/);
        }
        const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from cohorts where university_id = $1 and name like 'sur%'`, [university]);
        assert.equal(n, 0);
      });
    });

    describe('a deadlocked apply attempt is a lost race, never a failed batch', () => {
      // A trigger stands in for the other transaction: it fails the insert with 40P01, as the
      // deadlock detector does, the first `times` times.
      const failInserts = (times: number) => h.store.exec(`
        create sequence pds_test_deadlocks;
        create function pds_test_deadlock() returns trigger language plpgsql security definer as $$
        begin
          if new.first_name = 'Deadlock' and nextval('pds_test_deadlocks') <= ${times} then
            raise exception 'deadlock detected' using errcode = '40P01';
          end if;
          return new;
        end $$;
        create trigger pds_test_deadlock before insert on students for each row execute function pds_test_deadlock();`);
      const removeTrigger = () => h.store.exec('drop trigger pds_test_deadlock on students; drop function pds_test_deadlock(); drop sequence pds_test_deadlocks;');

      test('a deadlock on the first attempt: the rows are decided again and written', async () => {
        await failInserts(1);
        try {
          const rows = [student(), student({ first_name: 'Deadlock' }), student()];
          const res = await send('PUT', 'students', rows);
          assert.equal(res.status, 200, res.body);
          assert.deepEqual(res.json.counts, { created: 3, updated: 0, unchanged: 0, rejected: 0 });
          assert.equal(await count('email = any($1::text[])', [`{${rows.map((r) => r.email).join(',')}}`]), 3);
        } finally {
          await removeTrigger();
        }
      });

      test('a deadlock on every attempt: the changed rows are CONCURRENT_WRITE, the others keep their outcome', async () => {
        const existing = student();
        await send('PUT', 'students', [existing]);
        await failInserts(1000);
        try {
          const rows = [student(), student({ first_name: 'Deadlock' }), existing, student({ last_name: '' })];
          const res = await send('PUT', 'students', rows);
          assert.equal(res.status, 200, res.body);
          assert.deepEqual(res.json.results.map((r: any) => r.code ?? r.status), ['CONCURRENT_WRITE', 'CONCURRENT_WRITE', 'unchanged', 'MISSING_NAME']);
          assert.equal(await count('email = any($1::text[])', [`{${rows.map((r) => r.email).join(',')}}`]), 1);
          const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from accounts where email = $1`, [rows[0].email]);
          assert.equal(n, 0);
        } finally {
          await removeTrigger();
        }
      });

      test('inSavepoint undoes its own statements only and leaves the transaction usable', async () => {
        await h.store.exec('create table pds_test_savepoint (n int)');
        const deadlock = `do $$ begin raise exception 'deadlock detected' using errcode = '40P01'; end $$`;
        const committed = await h.store.transaction(async (tx) => {
          await tx.query('insert into pds_test_savepoint values (1)');
          const undone = await inSavepoint(tx, new Set(['40P01']), async () => {
            await tx.query('insert into pds_test_savepoint values (2)');
            await tx.exec(deadlock);
          });
          const kept = await inSavepoint(tx, new Set(['40P01']), () => tx.query<{ n: number }>('insert into pds_test_savepoint values (3) returning n'));
          return { undone: 'undone' in undone ? undone.undone.code : null, kept: 'ok' in kept ? [...kept.ok] : null };
        });
        assert.deepEqual(committed, { undone: '40P01', kept: [{ n: 3 }] });
        assert.deepEqual([...await h.store.query('select n from pds_test_savepoint order by n')], [{ n: 1 }, { n: 3 }]);
        // Any other failure is thrown, and fails the transaction as before.
        await assert.rejects(h.store.transaction((tx) => inSavepoint(tx, new Set(['40P01']), () => tx.query('select 1/0'))), { code: '22012' });
        await h.store.exec('drop table pds_test_savepoint');
      });
    });

    describe('the operator API', () => {
      const expectError = (res: { status: number; json: any }, status: number, code: string, message?: RegExp) => {
        assert.equal(res.status, status, JSON.stringify(res.json));
        assert.deepEqual(Object.keys(res.json).sort(), ERROR_KEYS);
        assert.equal(res.json.code, code);
        if (message) assert.match(res.json.message, message);
      };

      test('an email over 254 characters, or not an address, is 400', async () => {
        expectError(await h.admin('POST', '/accounts', { email: `${'x'.repeat(290)}@example.edu`, kind: 'staff' }), 400, 'INVALID_BODY', /email/);
        expectError(await h.admin('POST', '/accounts', { email: 'not an address', kind: 'staff' }), 400, 'INVALID_BODY', /email/);
        assert.equal((await h.admin('POST', '/accounts', { email: 'staff.member@example.edu', kind: 'staff' })).status, 201);
      });

      test('control characters and over-long text are 400 on every create', async () => {
        expectError(await h.admin('POST', '/consortia', { name: 'a\u0000b' }), 400, 'INVALID_BODY', /name/);
        expectError(await h.admin('POST', '/campuses', { university_id: university, name: 'Main', city: 'x'.repeat(3200) }), 400, 'INVALID_BODY', /city/);
        expectError(await h.admin('POST', '/resume-templates', { university_id: university, name: 'Line\nbreak' }), 400, 'INVALID_BODY', /name/);
        expectError(await h.admin('POST', '/cohorts', { university_id: university, ...COHORT, resume_template_names: ['a\u0000b'] }), 400, 'INVALID_BODY', /resume_template_names/);
        expectError(await h.admin('POST', '/tokens', { university_id: university, label: 'a\u0000b' }), 400, 'INVALID_BODY', /label/);
      });

      test('an unpaired surrogate is 400 on every create; a surrogate pair (an emoji) is text like any other', async () => {
        expectError(await h.admin('POST', '/universities', { name: 'Lone \ud800 University' }), 400, 'INVALID_BODY', /name/);
        expectError(await h.admin('POST', '/campuses', { university_id: university, name: 'Main', city: 'Ci\udfffty' }), 400, 'INVALID_BODY', /city/);
        expectError(await h.admin('POST', '/cohorts', { university_id: university, ...COHORT, name: 'lone-display', display_name: 'D\udc00' }),
          400, 'INVALID_BODY', /display_name/);
        const paired = await h.admin('POST', '/resume-templates', { university_id: university, name: 'Classic \ud83d\ude00' });
        assert.equal(paired.status, 201, paired.body);
        assert.equal(paired.json.name, 'Classic 😀');
      });

      test('a token that would expire in the past is 400; one in the future is issued', async () => {
        expectError(await h.admin('POST', '/tokens', { university_id: university, expires_at: '2020-01-01T00:00:00Z' }), 400, 'INVALID_BODY', /expires_at must be in the future/);
        // A leap second is a date-time to the schema, and no time to the service's clock: not "in the past".
        expectError(await h.admin('POST', '/tokens', { university_id: university, expires_at: '2030-06-30T23:59:60Z' }), 400, 'INVALID_BODY', /expires_at must be a time this service's clock can read/);
        assert.equal((await h.admin('POST', '/tokens', { university_id: university, expires_at: '2999-01-01T00:00:00Z' })).status, 201);
        // Reported in an audit: an offset RFC 3339 takes and PostgreSQL does not was 400 22009.
        const far = await h.admin('POST', '/tokens', { university_id: university, expires_at: '2030-01-01T00:00:00+23:59' });
        assert.equal(far.status, 201, far.body);
        assert.equal(Date.parse(far.json.expires_at), Date.parse('2029-12-31T00:01:00Z'));
        // null, as a record shows a token without expiry, is none: it was 400.
        const unending = await h.admin('POST', '/tokens', { university_id: university, expires_at: null });
        assert.equal(unending.status, 201, unending.body);
        assert.equal(unending.json.expires_at, null);
        const rotated = await h.admin('POST', `/tokens/${unending.json.id}/rotate`, { expires_at: null });
        assert.equal(rotated.status, 201, rotated.body);
        assert.equal(rotated.json.expires_at, null);
        // Reported in an audit: an instant past year 9999 in UTC was 400 22009, on issue and on rotation.
        assert.equal((await h.admin('POST', '/tokens', { university_id: university, expires_at: '9999-12-31T23:59:59Z' })).status, 201);
        expectError(await h.admin('POST', '/tokens', { university_id: university, expires_at: '9999-12-31T23:59:59-00:01' }),
          400, 'INVALID_BODY', /expires_at must be within year 9999 in UTC/);
        expectError(await h.admin('POST', `/tokens/${far.json.id}/rotate`, { expires_at: '9999-12-31T23:59:59-01:00' }),
          400, 'INVALID_BODY', /expires_at must be within year 9999 in UTC/);
      });

      test('a timezone must be an IANA zone name', async () => {
        expectError(await h.admin('POST', '/universities', { name: 'Mars College', timezone: 'Mars/Olympus' }), 400, 'INVALID_BODY', /timezone "Mars\/Olympus"/);
        expectError(await h.admin('POST', '/universities', { name: 'Posix College', timezone: 'posix/Europe/London' }), 400, 'INVALID_BODY', /timezone/);
        for (const timezone of ['Europe/London', 'UTC', 'Asia/Kolkata']) {
          const res = await h.admin('POST', '/universities', { name: `College in ${timezone}`, timezone });
          assert.equal(res.status, 201, res.body);
          assert.equal(res.json.timezone, timezone);
        }
      });

      test('a university of a name (or short_name) already onboarded is created too: 201, the contract names no conflict', async () => {
        const [existing] = await h.sql<{ name: string; short_name: string }>(`select name, short_name from universities where short_name is not null limit 1`);
        const again = await h.admin('POST', '/universities', { name: existing.name, short_name: existing.short_name });
        assert.equal(again.status, 201, again.body);
        assert.equal(again.json.name, existing.name);
        const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from universities where name = $1', [existing.name]);
        assert.equal(n, 2);
      });

      test('INVALID_REFERENCE names the missing reference', async () => {
        const missing = randomUUID();
        expectError(await h.admin('POST', '/universities', { name: 'Orphan University', consortium_id: missing }), 409, 'INVALID_REFERENCE', new RegExp(`^consortium_id ${missing} does not exist`));
        expectError(await h.admin('POST', '/campuses', { university_id: missing, name: 'Main' }), 409, 'INVALID_REFERENCE', new RegExp(`^university_id ${missing} does not exist`));
      });
    });
  });
}

// Two sessions at once need a server; PGlite is one session.
if (process.env.TEST_DATABASE_URL) {
  describe('two universities racing for the same new addresses on postgres', () => {
    let h: Harness;
    const tokens: string[] = [];

    before(async () => {
      h = await Harness.start('postgres');
      for (const name of ['North University', 'South University']) {
        const university = (await h.admin('POST', '/universities', { name })).json.id;
        assert.equal((await h.admin('POST', '/cohorts', { university_id: university, ...COHORT })).status, 201);
        tokens.push((await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token);
      }
      // Each new address takes 5 ms to insert, so the two batches surely overlap.
      await h.store.exec(`
        create function pds_test_slow_insert() returns trigger language plpgsql security definer as $$
        begin
          if new.email like 'contested.%' then perform pg_sleep(0.005); end if;
          return new;
        end $$;
        create trigger pds_test_slow_insert before insert on accounts for each row execute function pds_test_slow_insert();`);
    });
    after(() => h.close());

    test('batches naming the same addresses in opposite orders both answer 200; each address is created once', async () => {
      const rows = Array.from({ length: 40 }, (_, i) => ({
        email: `contested.${String(i).padStart(2, '0')}@example.edu`, first_name: 'C', last_name: `Row ${i}`, cohort_name: COHORT.name, is_alumni: false,
      }));
      const put = (token: string, batch: unknown[]) => h.request({
        method: 'PUT', url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify({ students: batch }),
      });
      const [north, south] = await Promise.all([put(tokens[0], rows), put(tokens[1], [...rows].reverse())]);
      assert.equal(north.status, 200, north.body);
      assert.equal(south.status, 200, south.body);
      assert.equal(north.json.counts.created + south.json.counts.created, rows.length);
      const outcomes = new Set([...north.json.results, ...south.json.results].map((r: any) => r.code ?? r.status));
      assert.deepEqual([...outcomes].filter((o) => !['created', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY', 'CONCURRENT_WRITE'].includes(o)), []);
      const [{ n }] = await h.sql<{ n: number }>(`select count(*)::int as n from students where email like 'contested.%'`);
      assert.equal(n, rows.length);
    });
  });
}
