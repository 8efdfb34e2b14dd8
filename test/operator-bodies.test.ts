/**
 * The operator API's bodies are closed and typed: a key a body does not accept, or a value of
 * another JSON type than its field's, is refused (400 INVALID_BODY) and nothing is written, never
 * silently dropped or converted. A dropped
 * `grace_second` made a rotation keep the old token a day; a dropped `can_wirte` issued a
 * read-only token.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LIMITS } from '../src/limits.ts';
import { COHORT_SHAPE } from '../src/resources/write-shapes.ts';
import { Harness, backends } from './support/harness.ts';

/** The tables an operator body can write to. */
const WRITTEN_TABLES = ['consortia', 'universities', 'campuses', 'resume_templates', 'accounts', 'cohorts', 'tokens', 'students', 'secondary_emails', 'alumni_flag_history'];

for (const backend of backends()) {
  describe(`operator bodies refuse unknown keys, on ${backend}`, () => {
    let h: Harness;
    let universityId: string;
    let studentId: string;
    let tokenId: string;

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 5 });
      universityId = h.demo!.universities[0].id;
      [{ id: studentId }] = await h.sql<{ id: string }>('select id from students where university_id = $1 order by id limit 1', [universityId]);
      [{ id: tokenId }] = await h.sql<{ id: string }>(`select id from tokens where label = 'demo read' and university_id = $1`, [universityId]);
    });
    after(() => h.close());

    /** Every written table's rows, as one snapshot to compare. */
    async function tableRows(): Promise<Record<string, unknown[]>> {
      const snapshot: Record<string, unknown[]> = {};
      for (const table of WRITTEN_TABLES) snapshot[table] = await h.sql(`select * from ${table} order by 1`);
      return snapshot;
    }

    async function expectRefusedKey(method: 'POST' | 'DELETE', url: string, body: Record<string, unknown>, key: string) {
      const before = await tableRows();
      const response = await h.admin(method, url, body);
      assert.equal(response.status, 400, `${url}: ${response.body}`);
      assert.equal(response.json.code, 'INVALID_BODY');
      assert.ok(response.json.message.includes(`"${key}"`), `${url}: the message names ${key}: ${response.json.message}`);
      assert.deepEqual(await tableRows(), before, `${url}: nothing was written`);
    }

    test('rotate with a misspelt grace_seconds: 400 naming it, the old token untouched and no replacement', async () => {
      await expectRefusedKey('POST', `/tokens/${tokenId}/rotate`, { grace_second: 0 }, 'grace_second');
      const [old] = await h.sql<{ expires_at: string | null }>('select expires_at from tokens where id = $1', [tokenId]);
      assert.equal(old.expires_at, null);
      // The spelt key still works, within its bound.
      assert.equal((await h.admin('POST', `/tokens/${tokenId}/rotate`, { grace_seconds: LIMITS.rotationGraceSeconds + 1 })).status, 400);
    });

    test('values of the wrong JSON type are refused as sent, never converted: 400, nothing written', async () => {
      const cases: [string, Record<string, unknown>][] = [
        [`/tokens/${tokenId}/rotate`, { grace_seconds: null }],
        [`/tokens/${tokenId}/rotate`, { grace_seconds: '60' }],
        ['/tokens', { university_id: universityId, can_write: 'true' }],
        ['/tokens', { university_id: universityId, can_write: [1] }],
        ['/tokens', { university_id: [universityId], can_write: false }],
        ['/consortia', { name: false }],
        ['/campuses', { university_id: universityId, name: ['Harbour'] }],
      ];
      for (const [url, body] of cases) {
        const before = await tableRows();
        const response = await h.admin('POST', url, body);
        assert.deepEqual([response.status, response.json.code], [400, 'INVALID_BODY'], `${url} ${JSON.stringify(body)}: ${response.body}`);
        assert.deepEqual(await tableRows(), before, `${url}: nothing was written`);
      }
      const [old] = await h.sql<{ expires_at: string | null }>('select expires_at from tokens where id = $1', [tokenId]);
      assert.equal(old.expires_at, null);
    });

    test('an app-side cohort is refused what a partner\'s row is: a blank campus_name, an intake_year out of its range', async () => {
      const cohort = {
        university_id: universityId, name: 'app-bounds', display_name: 'App', program: 'P', degree: 'BSc',
        start_date: '2020-09-01', end_date: '2024-06-30', intake_year: 2020, intake_term: 'Fall',
      };
      const years = COHORT_SHAPE.fields.intake_year.range;
      for (const [field, body] of [['intake_year', { ...cohort, intake_year: years.max + 1 }], ['intake_year', { ...cohort, intake_year: years.min - 1 }], ['campus_name', { ...cohort, campus_name: ' ' }]] as const) {
        const before = await tableRows();
        const response = await h.admin('POST', '/cohorts', body);
        assert.deepEqual([response.status, response.json.code], [400, 'INVALID_BODY'], response.body);
        assert.ok(response.json.message.includes(field), response.json.message);
        assert.deepEqual(await tableRows(), before, 'nothing was written');
      }
      assert.equal((await h.admin('POST', '/cohorts', { ...cohort, intake_year: years.max })).status, 201);
    });

    test('a blank or multi-line name is refused in words, not with the pattern that checks it', async () => {
      for (const [url, body] of [['/consortia', { name: ' ' }], ['/universities', { name: 'U\nV' }]] as const) {
        const response = await h.admin('POST', url, body);
        assert.deepEqual([response.status, response.json.code], [400, 'INVALID_BODY'], response.body);
        assert.equal(response.json.message, 'The request body is invalid: body/name must not be blank, and must be single-line text without control characters or unpaired surrogates.');
      }
    });

    test('a token with a misspelt can_write: 400 naming it, no token issued', async () => {
      await expectRefusedKey('POST', '/tokens', { university_id: universityId, can_wirte: true }, 'can_wirte');
      const issued = await h.admin('POST', '/tokens', { university_id: universityId, can_write: true });
      assert.equal(issued.status, 201);
      assert.equal(issued.json.can_write, true);
    });

    test('every other operator body: an unknown key is 400 naming it, nothing written', async () => {
      const bodies: [url: string, body: Record<string, unknown>][] = [
        ['/consortia', { name: `Closed Alliance ${backend}` }],
        ['/universities', { name: `Closed University ${backend}` }],
        ['/campuses', { university_id: universityId, name: 'Closed Campus' }],
        ['/resume-templates', { university_id: universityId, name: 'Closed' }],
        ['/accounts', { email: `closed-${backend}@example.edu`, kind: 'staff' }],
        ['/cohorts', {
          university_id: universityId, name: 'closed-2026', display_name: 'Closed 2026', program: 'Closed', degree: 'BSc',
          start_date: '2026-09-01', end_date: '2029-06-30', intake_year: 2026, intake_term: 'Fall',
        }],
        ['/demo', { students: 5, seed: 77 }],
        [`/students/${studentId}/graduation-date`, { graduation_date: '2001-06-30' }],
        [`/students/${studentId}/verify-email`, { email: `closed-secondary-${backend}@example.edu` }],
        [`/students/${studentId}/sign-in`, {}],
      ];
      for (const [url, body] of bodies) await expectRefusedKey('POST', url, { ...body, unexpected_key: 1 }, 'unexpected_key');
    });

    test('an erasure or a revocation with a body: an unknown key is 400 naming it, nothing erased or revoked', async () => {
      // Both are irreversible: a body the route does not read must not pass unnoticed.
      await expectRefusedKey('DELETE', `/students/${studentId}`, { confirm: false }, 'confirm');
      await expectRefusedKey('DELETE', `/tokens/${tokenId}`, { reason: 'x' }, 'reason');
    });

    test('a sign-in takes no body, or an empty object', async () => {
      assert.equal((await h.admin('POST', `/students/${studentId}/sign-in`)).status, 200);
      assert.equal((await h.admin('POST', `/students/${studentId}/sign-in`, {})).status, 200);
    });
  });
}
