/**
 * Dry runs (`Prefer: tx=rollback`): for every write mode of students and cohorts, the dry run
 * answers what the real write that follows it answers (ids of created rows aside) and leaves
 * every table of the database exactly as it was, alumni history included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { databaseContents } from './support/database-contents.ts';
import { Harness, storeBackends } from './support/harness.ts';
import { parseExposition, valueOf } from './support/prometheus.ts';

type Method = 'PUT' | 'POST' | 'PATCH';
type Resource = 'students' | 'cohorts';

const PAST_COHORT = {
  name: 'hist-2018', display_name: 'History 2018', program: 'History', degree: 'BA',
  start_date: '2018-09-01', end_date: '2021-06-30', intake_year: 2018, intake_term: 'Fall',
};
const CURRENT_COHORT = {
  name: 'hist-2025', display_name: 'History 2025', program: 'History', degree: 'BA',
  start_date: '2025-09-01', end_date: '2999-06-30', intake_year: 2025, intake_term: 'Fall', campus_name: 'North', resume_template_names: ['Plain'],
};

/** A response body with the ids of created rows masked: a dry run's ids are never stored, so the real write draws others. */
function withCreatedIdsMasked(body: any): any {
  return { ...body, results: body.results.map((r: any) => (r.status === 'created' ? { ...r, id: '<created>' } : r)) };
}

for (const backend of storeBackends()) {
  describe(`dry runs on ${backend}`, () => {
    let h: Harness;
    let university: string;
    let writeToken: string;
    let serial = 0;

    const email = (tag: string) => `${tag}.${++serial}@northgate.example.edu`;
    const send = (method: Method, resource: Resource, rows: unknown[], prefer?: string) =>
      h.request({
        method, url: `/v1/${resource}`,
        headers: { authorization: `Bearer ${writeToken}`, 'content-type': 'application/json', ...(prefer ? { prefer } : {}) },
        payload: JSON.stringify({ [resource]: rows }),
      });
    const student = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
      email: email('student'), first_name: 'Mary', last_name: 'Seacole', cohort_name: CURRENT_COHORT.name, is_alumni: false, ...overrides,
    });
    const write = async (method: Method, resource: Resource, rows: unknown[]) => {
      const res = await send(method, resource, rows);
      assert.equal(res.status, 200, res.body);
      return res.json;
    };

    /** The dry run, then the real write: same answer, and the dry run left the database as it was. */
    async function dryRunThenWrite(method: Method, resource: Resource, rows: unknown[]) {
      const before = await databaseContents(h);
      const dry = await send(method, resource, rows, 'tx=rollback');
      assert.equal(dry.status, 200, dry.body);
      assert.equal(dry.headers['preference-applied'], 'tx=rollback');
      assert.deepEqual(await databaseContents(h), before, 'the dry run changed the database');
      const real = await send(method, resource, rows);
      assert.equal(real.status, 200, real.body);
      assert.equal(real.headers['preference-applied'], undefined);
      assert.deepEqual(withCreatedIdsMasked(dry.json), withCreatedIdsMasked(real.json));
      assert.notDeepEqual(await databaseContents(h), before, 'the real write changed nothing: the comparison proves nothing');
      return { dry: dry.json, real: real.json };
    }

    before(async () => {
      h = await Harness.start(backend);
      university = (await h.admin('POST', '/universities', { name: 'Northgate University' })).json.id;
      await h.admin('POST', '/campuses', { university_id: university, name: 'North' });
      await h.admin('POST', '/resume-templates', { university_id: university, name: 'Plain' });
      writeToken = (await h.admin('POST', '/tokens', { university_id: university, can_write: true })).json.token;
      await write('PUT', 'cohorts', [PAST_COHORT, CURRENT_COHORT]);
    });
    after(() => h.close());

    test('PUT students: creates, updates with history and notes, unchanged and rejected rows', async () => {
      const mover = student({ external_id: `NG-${serial}` });
      const unchanged = student();
      const secondary = student({ external_id: `NG-S-${serial}` });
      await write('PUT', 'students', [mover, unchanged, secondary]);
      const { dry, real } = await dryRunThenWrite('PUT', 'students', [
        student({ is_alumni: true, date_of_birth: '2001-01-01' }),
        { ...mover, cohort_name: PAST_COHORT.name, is_alumni: false },
        unchanged,
        { ...secondary, email: email('secondary') },
        student({ cohort_name: 'no-such-cohort' }),
        { email: 'not-an-address' },
      ]);
      assert.deepEqual(real.counts, { created: 1, updated: 2, unchanged: 1, rejected: 2 });
      assert.deepEqual(dry.dropped_fields, ['date_of_birth']);
      assert.ok(dry.results[0].notes?.length, 'is_alumni disagreeing with the cohort carries a note');
      assert.ok(dry.results[1].notes?.length, 'a move whose sent flag disagrees carries a note');
      assert.ok(dry.results[3].notes?.length, 'a new address for a known external_id carries a note');
      assert.notEqual(dry.results[0].id, real.results[0].id, 'a dry run\'s created id is never assigned');
      const history = await h.sql<{ reason: string }>('select reason from alumni_flag_history where student_id = $1 order by id', [real.results[1].id]);
      assert.ok(history.some((entry) => entry.reason === 'cohort_move'), 'the real write recorded the move the dry run only reported');
    });

    test('a batch that writes nothing, of students or cohorts, leaves every table as it was, its change number included; with an Idempotency-Key its answer is kept', async () => {
      const known = student();
      await write('PUT', 'students', [known]);
      const before = await databaseContents(h);
      const students = await write('PUT', 'students', [known, student({ cohort_name: 'no-such-cohort' })]);
      assert.deepEqual(students.counts, { created: 0, updated: 0, unchanged: 1, rejected: 1 });
      const cohorts = await write('PUT', 'cohorts', [PAST_COHORT]);
      assert.deepEqual(cohorts.counts, { created: 0, updated: 0, unchanged: 1, rejected: 0 });
      assert.deepEqual(await databaseContents(h), before);
      const keyed = () => h.request({
        method: 'PUT', url: '/v1/students', payload: JSON.stringify({ students: [known] }),
        headers: { authorization: `Bearer ${writeToken}`, 'content-type': 'application/json', 'idempotency-key': `replay-${serial}` },
      });
      assert.equal((await keyed()).headers['idempotent-replayed'], undefined);
      const again = await keyed();
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.json.counts, { created: 0, updated: 0, unchanged: 1, rejected: 0 });
    });

    test('POST students: a create and an ALREADY_EXISTS', async () => {
      const existing = student();
      await write('PUT', 'students', [existing]);
      const { real } = await dryRunThenWrite('POST', 'students', [student({ phone: '+447700900124' }), existing]);
      assert.deepEqual(real.counts, { created: 1, updated: 0, unchanged: 0, rejected: 1 });
      assert.equal(real.results[1].code, 'ALREADY_EXISTS');
    });

    test('PATCH students: a graduation date, an alumni flag and a NOT_FOUND', async () => {
      const graduate = student();
      const flagged = student();
      await write('PUT', 'students', [graduate, flagged]);
      const { real } = await dryRunThenWrite('PATCH', 'students', [
        { email: graduate.email, graduation_date: '2024-06-30' },
        { email: flagged.email, is_alumni: true },
        { email: email('nobody') },
      ]);
      assert.deepEqual(real.counts, { created: 0, updated: 2, unchanged: 0, rejected: 1 });
      assert.equal(real.results[2].code, 'NOT_FOUND');
    });

    test('PUT cohorts: a create, an update, an unchanged and a rejected row', async () => {
      const { real } = await dryRunThenWrite('PUT', 'cohorts', [
        { ...CURRENT_COHORT, name: `hist-new-${++serial}` },
        { ...PAST_COHORT, display_name: `History 2018 (${serial})` },
        CURRENT_COHORT,
        { ...CURRENT_COHORT, name: `hist-bad-${serial}`, campus_name: 'Nowhere', study: 'evening' },
      ]);
      assert.deepEqual(real.counts, { created: 1, updated: 1, unchanged: 1, rejected: 1 });
      assert.equal(real.results[3].code, 'CAMPUS_NOT_FOUND');
      assert.deepEqual(real.dropped_fields, ['study']);
    });

    test('POST cohorts: a create with templates and an ALREADY_EXISTS', async () => {
      const { real } = await dryRunThenWrite('POST', 'cohorts', [{ ...CURRENT_COHORT, name: `hist-post-${++serial}` }, PAST_COHORT]);
      assert.deepEqual(real.counts, { created: 1, updated: 0, unchanged: 0, rejected: 1 });
      assert.equal(real.results[1].code, 'ALREADY_EXISTS');
    });

    test('PATCH cohorts: an update, an inverted range and a NOT_FOUND', async () => {
      const { real } = await dryRunThenWrite('PATCH', 'cohorts', [
        { name: PAST_COHORT.name, study_mode: 'hybrid' },
        { name: CURRENT_COHORT.name, end_date: '2020-01-01' },
        { name: 'no-such-cohort', study_mode: 'online' },
      ]);
      assert.deepEqual(real.counts, { created: 0, updated: 1, unchanged: 0, rejected: 2 });
      assert.deepEqual(real.results.map((r: any) => r.code), [undefined, 'INVALID_DATE_RANGE', 'NOT_FOUND']);
    });

    test('a dry run of a move to a cohort with a past end: the derivation and its history are reported, not kept', async () => {
      const row = student();
      const created = (await write('PUT', 'students', [row])).results[0];
      const historyBefore = await h.sql('select * from alumni_flag_history where student_id = $1', [created.id]);
      const dry = await send('PATCH', 'students', [{ email: row.email, cohort_name: PAST_COHORT.name }], 'tx=rollback');
      assert.equal(dry.json.results[0].status, 'updated');
      const [stored] = await h.sql<{ is_alumni: boolean; cohort_name: string }>(
        'select s.is_alumni, c.name as cohort_name from students s join cohorts c on c.university_id = s.university_id and c.id = s.cohort_id where s.id = $1', [created.id]);
      assert.deepEqual(stored, { is_alumni: false, cohort_name: CURRENT_COHORT.name });
      assert.deepEqual(await h.sql('select * from alumni_flag_history where student_id = $1', [created.id]), historyBefore);
    });

    describe('the Prefer header on writes', () => {
      test('tx=commit is the default, echoed only when asked for', async () => {
        const asked = await send('PUT', 'students', [student()], 'tx=commit');
        assert.equal(asked.status, 200, asked.body);
        assert.equal(asked.headers['preference-applied'], 'tx=commit');
        assert.equal(asked.json.counts.created, 1);
        assert.equal((await h.sql('select 1 from students where id = $1', [asked.json.results[0].id])).length, 1);
      });

      test('Preference-Applied lists tx before handling, as PostgREST does', async () => {
        const res = await send('PUT', 'cohorts', [CURRENT_COHORT], 'handling=strict, tx=rollback');
        assert.equal(res.status, 200, res.body);
        assert.equal(res.headers['preference-applied'], 'tx=rollback, handling=strict');
      });

      test('the first tx preference wins; a value outside commit|rollback is ignored leniently', async () => {
        const row = student();
        const first = await send('PUT', 'students', [row], 'tx=rollback, tx=commit');
        assert.equal(first.headers['preference-applied'], 'tx=rollback');
        assert.deepEqual(await h.sql('select 1 from students where email = $1', [row.email as string]), []);
        const unknown = await send('PUT', 'students', [row], 'tx=maybe');
        assert.equal(unknown.status, 200, unknown.body);
        assert.equal(unknown.headers['preference-applied'], undefined);
        assert.equal((await h.sql('select 1 from students where email = $1', [row.email as string])).length, 1);
      });

      test('a dry run in any form RFC 7240 allows is a dry run: names in any case, spaces around =, a quoted value, parameters', async () => {
        for (const prefer of ['tx = rollback', 'TX=rollback', 'tx="rollback"', 'tx=rollback; foo=1', 'Tx=ROLLBACK', 'tx=rollback ,handling=lenient']) {
          const row = student();
          const res = await send('PUT', 'students', [row], prefer);
          assert.equal(res.status, 200, res.body);
          assert.match(String(res.headers['preference-applied']), /^tx=rollback\b/, prefer);
          assert.equal(res.json.counts.created, 1, prefer);
          assert.deepEqual(await h.sql('select 1 from students where email = $1', [row.email as string]), [], `${prefer} wrote`);
        }
      });

      test('handling=strict with an unknown preference: 400 PGRST122, nothing written', async () => {
        const row = student();
        const res = await send('PUT', 'students', [row], 'handling=strict, tx=later');
        assert.equal(res.status, 400);
        assert.equal(res.json.code, 'PGRST122');
        assert.equal(res.json.details, 'Invalid preferences: tx=later');
        assert.deepEqual(await h.sql('select 1 from students where email = $1', [row.email as string]), []);
      });

      test('handling=strict with a PostgREST preference a batch does not apply (max-affected, a guard taken silently): 400 PGRST122, nothing written', async () => {
        const row = student();
        for (const prefer of ['max-affected=1', 'return=representation', 'resolution=merge-duplicates', 'missing=default']) {
          const res = await send('PUT', 'students', [row], `handling=strict, ${prefer}`);
          assert.deepEqual([res.status, res.json.code, res.json.details], [400, 'PGRST122', `Invalid preferences: ${prefer}`]);
        }
        assert.deepEqual(await h.sql('select 1 from students where email = $1', [row.email as string]), []);
        // Without strict handling they are ignored, as PostgREST ignores max-affected.
        assert.equal((await send('PUT', 'students', [row], 'max-affected=1')).status, 200);
      });

      test('a dry run\'s rows are not counted in the batch metrics; a real write\'s are', async () => {
        const created = async () => valueOf(parseExposition((await h.request({ method: 'GET', url: '/metrics' })).body), 'pds_batch_rows_total', { resource: 'students', outcome: 'created' });
        const rows = [student(), student()];
        const before = await created();
        assert.equal((await send('POST', 'students', rows, 'tx=rollback')).json.counts.created, 2);
        assert.equal(await created(), before);
        assert.equal((await send('POST', 'students', rows)).json.counts.created, 2);
        assert.equal(await created(), before + 2);
      });

      test('the OpenAPI description documents the preference and its echo on every write', async () => {
        const doc = (await h.get('/v1/openapi.json', null)).json;
        for (const resource of ['students', 'cohorts']) {
          for (const method of ['put', 'post', 'patch']) {
            const operation = doc.paths[`/${resource}`][method];
            const parameters = operation.parameters.map((p: any) => doc.components.parameters[p.$ref.split('/').pop()]);
            assert.ok(parameters.some((p: any) => p.name === 'Prefer' && p.in === 'header' && /tx=rollback/.test(p.description)), `${method} ${resource}`);
            assert.ok(operation.responses['200'].headers['Preference-Applied'], `${method} ${resource}`);
          }
        }
      });

      test('a dry run still refuses what the real write refuses at request level', async () => {
        const res = await send('PUT', 'students', Array.from({ length: 501 }, () => student()), 'tx=rollback');
        assert.equal(res.status, 413);
        assert.equal(res.json.code, 'BATCH_TOO_LARGE');
      });
    });
  });
}
