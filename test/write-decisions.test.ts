/**
 * The pure parts of batch writes, table-driven: validation, per-row decisions over an
 * in-memory state (every code, every line of the is_alumni table), and the race-retry rule.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WriteMode } from '../src/writes/batch.ts';
import { settleRaces } from '../src/writes/batches.ts';
import { type CohortBatchState, type CohortRecord, decideCohortBatch, validateCohortRow } from '../src/writes/cohort-rules.ts';
import { type StudentRow, sentStudentKeys, studentKeys, validateStudentBatch, validateStudentRow } from '../src/writes/student-rows.ts';
import {
  type EmailOwner, type StudentBatchState, type StudentRecord, decideStudentBatch,
} from '../src/writes/student-rules.ts';

const TODAY = '2026-11-22';
const ENDED = { id: 'c-ended', endDate: '2022-06-30' };
const RUNNING = { id: 'c-running', endDate: '2999-06-30' };

const ada: StudentRecord = {
  id: 's-ada', email: 'ada@u.edu', externalId: 'A1', firstName: 'Ada', lastName: 'Lovelace', phone: null,
  graduationDate: null, isAlumni: false, cohortId: RUNNING.id, cohortEndDate: RUNNING.endDate,
};
const bob: StudentRecord = { ...ada, id: 's-bob', email: 'bob@u.edu', externalId: null };
const carol: StudentRecord = { ...ada, id: 's-carol', email: 'carol@u.edu', externalId: 'C1', isAlumni: true };

const owners: [string, EmailOwner][] = [
  ['elsewhere@v.edu', { kind: 'student', university: 'another', erased: false }],
  ['staff@u.edu', { kind: 'staff', university: 'yours', erased: false }],
  ['seeker@mail.com', { kind: 'self_serve', university: 'none', erased: false }],
  ['seeker@v.edu', { kind: 'self_serve', university: 'another', erased: false }],
  ['seeker@u.edu', { kind: 'self_serve', university: 'yours', erased: false }],
  ['erased@u.edu', { kind: 'student', university: 'yours', erased: true }],
];

const state: StudentBatchState = {
  byEmail: new Map([[ada.email, ada], ['ada.alt@u.edu', ada], [bob.email, bob], [carol.email, carol]]),
  byExternalId: new Map([['A1', ada], ['C1', carol]]),
  emailOwners: new Map(owners.map(([email, owner]) => [email, [owner]])),
  erasedExternalIds: new Set(['GONE']),
  cohortsByName: new Map([['ended', [ENDED]], ['running', [RUNNING]], ['twin', [ENDED, RUNNING]]]),
};

let ids = 0;
const context = (mode: WriteMode) => ({ mode, today: TODAY, newId: () => `new-${++ids}` });

function row(fields: Record<string, unknown>, mode: WriteMode = 'put'): StudentRow {
  const validated = validateStudentRow({ first_name: 'N', last_name: 'M', cohort_name: 'running', is_alumni: false, ...fields }, 0, mode);
  assert.ok('ok' in validated, JSON.stringify(validated));
  return validated.ok;
}
const patchRow = (fields: Record<string, unknown>) => {
  const validated = validateStudentRow(fields, 0, 'patch');
  assert.ok('ok' in validated, JSON.stringify(validated));
  return validated.ok;
};
const decide = (r: StudentRow, mode: WriteMode) => decideStudentBatch([r], state, context(mode))[0];
const codeOf = (r: StudentRow, mode: WriteMode) => {
  const d = decide(r, mode);
  return d.kind === 'reject' ? d.rejection.code : d.kind;
};

describe('validateStudentBatch', () => {
  test('later rows naming an email or external_id an earlier row named, valid or refused, are DUPLICATE_IN_BATCH, whatever else is wrong with them (an external_id named again with an address that is none included)', () => {
    const valid = { first_name: 'N', last_name: 'M', cohort_name: 'running', is_alumni: false };
    const codes = validateStudentBatch([
      { ...valid, email: 'x@u.edu', external_id: 'X1' }, { ...valid, email: ' X@U.edu' }, { ...valid, email: 'y@u.edu', external_id: ' X1 ' },
      { ...valid, email: 'z@u.edu', first_name: '', external_id: 'Z1' }, { ...valid, email: 'z@u.edu' }, { ...valid, email: 'w@u.edu', external_id: 'Z1' },
      { ...valid, email: 'x@u.edu', phone: '555' }, { email: 'z@u.edu' }, { ...valid, email: 'no address', external_id: 'X1' },
      'not a row', { ...valid, email: 'v@u.edu', phone: '555' },
    ], 'put').map((v) => ('ok' in v ? 'ok' : v.rejected.code));
    assert.deepEqual(codes, ['ok', 'DUPLICATE_IN_BATCH', 'DUPLICATE_IN_BATCH', 'MISSING_NAME', 'DUPLICATE_IN_BATCH', 'DUPLICATE_IN_BATCH',
      'DUPLICATE_IN_BATCH', 'DUPLICATE_IN_BATCH', 'DUPLICATE_IN_BATCH', 'INVALID_FIELD', 'INVALID_PHONE']);
  });
});

describe('sentStudentKeys', () => {
  test('the keys sent include every key of the rows that pass validation, and no text the database refuses', () => {
    const raw = [
      { email: ' Ada@U.edu ', first_name: 'Ada', last_name: 'L', cohort_name: ' cs-2025 ', is_alumni: false, external_id: ' A1 ' },
      { email: 'bob@u.edu', first_name: '', cohort_name: 'law', external_id: 'B\u00001' },
      { email: 'n\u0000ul@u.edu', cohort_name: 'cs-2025' },
      { email: 'not an address', external_id: 'X9', cohort_name: 'bio' },
      { email: 42 },
      'not a row',
      { email: 'carol@u.edu', first_name: 'Carol', last_name: 'C', cohort_name: 'c\u00002025', is_alumni: true, external_id: null },
      { email: 'dan@u.edu', first_name: 'Dan', last_name: 'D', cohort_name: 'cs-2025', is_alumni: true },
    ];
    const keys = sentStudentKeys(raw);
    for (const mode of ['put', 'post', 'patch'] as WriteMode[]) {
      const valid = validateStudentBatch(raw, mode).flatMap((v) => ('ok' in v ? [v.ok] : []));
      assert.ok(valid.length > 0);
      // The keys the state of the valid rows alone is read by (loadStudentState).
      const own = studentKeys(valid);
      for (const field of ['emails', 'externalIds', 'cohortNames'] as const) {
        for (const key of own[field]) assert.ok(keys[field].includes(key), `${key} is not among ${keys[field].join(', ')}`);
      }
    }
    assert.deepEqual(keys, {
      emails: ['ada@u.edu', 'bob@u.edu', 'not an address', 'carol@u.edu', 'dan@u.edu'],
      externalIds: ['A1', 'X9'],
      cohortNames: ['cs-2025', 'law', 'bio'],
    });
  });
});

describe('validateStudentRow', () => {
  const cases: [string, Record<string, unknown>, WriteMode, string | null][] = [
    ['a full create row', { email: ' Ada@U.edu ', first_name: 'A', last_name: 'L', cohort_name: 'x', is_alumni: true }, 'post', null],
    ['PATCH needs only the email', { email: 'a@u.edu' }, 'patch', null],
    ['no email', { first_name: 'A' }, 'patch', 'INVALID_EMAIL'],
    ['email not a string', { email: 7 }, 'patch', 'INVALID_EMAIL'],
    ['email without a domain dot', { email: 'a@u' }, 'patch', 'INVALID_EMAIL'],
    // Invisible, so the address looks like another: a@u.edu.
    ['email with a zero-width space', { email: 'a\u200b@u.edu' }, 'patch', 'INVALID_EMAIL'],
    ['email with a right-to-left override', { email: 'a\u202e@u.edu' }, 'patch', 'INVALID_EMAIL'],
    ['email with an accent, which is an address', { email: 'josé@u.edu' }, 'patch', null],
    ['email with dotted words and a hyphenated domain, which is an address', { email: 'ada.m.lovelace@cs-dept.u.edu' }, 'patch', null],
    ...['a..b@u.edu', '.a@u.edu', 'a.@u.edu', 'a@-u.edu', 'a@u-.edu', 'a@u.edu.', 'a@u..edu'].map((email): [string, Record<string, unknown>, WriteMode, string] =>
      [`${email}, not an address`, { email }, 'patch', 'INVALID_EMAIL']),
    ['a name with a line separator (U+2028)', { email: 'a@u.edu', first_name: 'A\u2028B' }, 'patch', 'INVALID_FIELD'],
    ['create without last_name', { email: 'a@u.edu', first_name: 'A', cohort_name: 'x', is_alumni: true }, 'put', 'MISSING_NAME'],
    ['a blank name on PATCH', { email: 'a@u.edu', first_name: ' ' }, 'patch', 'MISSING_NAME'],
    ['a phone without +', { email: 'a@u.edu', phone: '447700900123' }, 'patch', 'INVALID_PHONE'],
    ['a phone that is a number', { email: 'a@u.edu', phone: 447700900123 }, 'patch', 'INVALID_PHONE'],
    ['a null phone clears', { email: 'a@u.edu', phone: null }, 'patch', null],
    ['create without cohort_name', { email: 'a@u.edu', first_name: 'A', last_name: 'L', is_alumni: true }, 'post', 'MISSING_COHORT'],
    ['cohort_name null on PATCH', { email: 'a@u.edu', cohort_name: null }, 'patch', 'MISSING_COHORT'],
    ['create without is_alumni', { email: 'a@u.edu', first_name: 'A', last_name: 'L', cohort_name: 'x' }, 'put', 'MISSING_IS_ALUMNI'],
    ['is_alumni null on create', { email: 'a@u.edu', first_name: 'A', last_name: 'L', cohort_name: 'x', is_alumni: null }, 'post', 'MISSING_IS_ALUMNI'],
    ['is_alumni null on PATCH', { email: 'a@u.edu', is_alumni: null }, 'patch', 'INVALID_FIELD'],
    ['an impossible date', { email: 'a@u.edu', graduation_date: '2023-02-29' }, 'patch', 'INVALID_FIELD'],
    // Date.UTC read the years 0–99 as 1900–1999, and refused these.
    ['a date in year 1', { email: 'a@u.edu', graduation_date: '0001-01-01' }, 'patch', null],
    ['a leap day in year 96', { email: 'a@u.edu', graduation_date: '0096-02-29' }, 'patch', null],
    ['the last day of year 99', { email: 'a@u.edu', graduation_date: '0099-12-31' }, 'patch', null],
    ['29 February of year 100, not a leap year', { email: 'a@u.edu', graduation_date: '0100-02-29' }, 'patch', 'INVALID_FIELD'],
    ['year 0, which PostgreSQL has not', { email: 'a@u.edu', graduation_date: '0000-06-30' }, 'patch', 'INVALID_FIELD'],
    ['the last day of year 9999', { email: 'a@u.edu', graduation_date: '9999-12-31' }, 'patch', null],
    ['a date in another form', { email: 'a@u.edu', graduation_date: '06/30/2023' }, 'patch', 'INVALID_FIELD'],
    ['a blank external_id', { email: 'a@u.edu', external_id: ' ' }, 'patch', 'INVALID_FIELD'],
    ['a row that is not an object', [] as unknown as Record<string, unknown>, 'patch', 'INVALID_FIELD'],
    // A length holds for the value as stored, trimmed: these were INVALID_FIELD for their spaces.
    ['an address of 254 characters with spaces around it', { email: ` ${'a'.repeat(60)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}.org ` }, 'patch', null],
    // RFC 5321's local part of at most 64 bytes, RFC 1035's labels of at most 63 characters (an IDN label's punycode).
    ['a local part of 64 bytes', { email: `${'é'.repeat(32)}@u.edu` }, 'patch', null],
    ['a local part of 65 bytes', { email: `${'é'.repeat(32)}a@u.edu` }, 'patch', 'INVALID_EMAIL'],
    ['a domain label of 63 characters', { email: `a@${'b'.repeat(63)}.edu` }, 'patch', null],
    ['a domain label of 64 characters', { email: `a@${'b'.repeat(64)}.edu` }, 'patch', 'INVALID_EMAIL'],
    ['an IDN label whose punycode is 66 characters', { email: `a@${'ü'.repeat(60)}.edu` }, 'patch', 'INVALID_EMAIL'],
    ['an external_id of 100 characters with spaces around it', { email: 'a@u.edu', external_id: `  ${'e'.repeat(100)}  ` }, 'patch', null],
    ['a first_name of 200 characters with spaces around it', { email: 'a@u.edu', first_name: ` ${'f'.repeat(200)} ` }, 'patch', null],
    ['a first_name of 201 characters once trimmed', { email: 'a@u.edu', first_name: ` ${'f'.repeat(201)} ` }, 'patch', 'INVALID_FIELD'],
  ];
  for (const [name, fields, mode, code] of cases) {
    test(`${name} → ${code ?? 'valid'}`, () => {
      const validated = validateStudentRow(fields, 0, mode);
      assert.equal('rejected' in validated ? validated.rejected.code : null, code);
    });
  }
  test('a date PostgreSQL cannot hold is refused with the years it can', () => {
    const validated = validateStudentRow({ email: 'a@u.edu', graduation_date: '0000-06-30' }, 0, 'patch');
    assert.ok('rejected' in validated);
    assert.equal(validated.rejected.message, 'graduation_date must be a calendar date in YYYY-MM-DD form, in the years 0001 to 9999, or null.');
  });
  test('the email is trimmed and lower-cased but the sent form is kept for the result', () => {
    const validated = validateStudentRow({ email: ' Ada@U.edu ' }, 0, 'patch');
    assert.ok('ok' in validated);
    assert.deepEqual([validated.ok.email, validated.ok.sentEmail], ['ada@u.edu', ' Ada@U.edu ']);
  });
});

describe('student decisions: matching and codes', () => {
  const cases: [string, StudentRow, WriteMode, string][] = [
    ['a new address creates on PUT', row({ email: 'new@u.edu' }), 'put', 'create'],
    ['a new address creates on POST', row({ email: 'new@u.edu' }), 'post', 'create'],
    ['PATCH never creates', patchRow({ email: 'new@u.edu', first_name: 'X' }), 'patch', 'NOT_FOUND'],
    ['POST of an existing student', row({ email: 'ada@u.edu' }), 'post', 'ALREADY_EXISTS'],
    ['another university\'s address', row({ email: 'elsewhere@v.edu' }), 'put', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY'],
    ['a staff address', row({ email: 'staff@u.edu' }), 'put', 'EMAIL_BELONGS_TO_NON_STUDENT'],
    ['a self-serve address of no university', row({ email: 'seeker@mail.com' }), 'post', 'EMAIL_BELONGS_TO_EXISTING_ACCOUNT'],
    ['a self-serve address of another university', row({ email: 'seeker@v.edu' }), 'put', 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY'],
    ['a self-serve address of the university', row({ email: 'seeker@u.edu' }), 'put', 'EMAIL_BELONGS_TO_EXISTING_ACCOUNT'],
    ['an erased address', row({ email: 'erased@u.edu' }), 'put', 'ACCOUNT_DELETED'],
    ['an erased address on PATCH', patchRow({ email: 'erased@u.edu', first_name: 'X' }), 'patch', 'ACCOUNT_DELETED'],
    ['an erased external_id', row({ email: 'new@u.edu', external_id: 'GONE' }), 'put', 'ACCOUNT_DELETED'],
    ['external_id of A with the email of B', row({ email: 'bob@u.edu', external_id: 'A1' }), 'put', 'EXTERNAL_ID_CONFLICT'],
    ['an unknown external_id with the email of a keyed student', row({ email: 'ada@u.edu', external_id: 'Z9' }), 'put', 'EXTERNAL_ID_CONFLICT'],
    ['external_id of A with a staff address', row({ email: 'staff@u.edu', external_id: 'A1' }), 'put', 'EMAIL_BELONGS_TO_NON_STUDENT'],
    ['no such cohort', row({ email: 'new@u.edu', cohort_name: 'nope' }), 'put', 'COHORT_NOT_FOUND'],
    ['a shared cohort name', row({ email: 'new@u.edu', cohort_name: 'twin' }), 'put', 'COHORT_NAME_AMBIGUOUS'],
    ['a move to a shared name', patchRow({ email: 'ada@u.edu', cohort_name: 'twin' }), 'patch', 'COHORT_NAME_AMBIGUOUS'],
    ['the same values again', row({ email: 'ada@u.edu', first_name: 'Ada', last_name: 'Lovelace', external_id: 'A1' }), 'put', 'unchanged'],
    ['a secondary address matches its student', patchRow({ email: 'ada.alt@u.edu' }), 'patch', 'unchanged'],
  ];
  for (const [name, r, mode, expected] of cases) test(`${name} → ${expected}`, () => assert.equal(codeOf(r, mode), expected));

  test('external_id of A with an unknown email: A, a secondary address and a note', () => {
    const d = decide(row({ email: 'ada.new@u.edu', external_id: 'A1', first_name: 'Ada', last_name: 'Lovelace' }), 'put');
    assert.equal(d.kind, 'update');
    assert.ok(d.kind === 'update');
    assert.deepEqual([d.id, d.secondaryEmail, d.values.email], ['s-ada', 'ada.new@u.edu', 'ada@u.edu']);
    assert.match(d.notes[0], /secondary address/);
  });

  test('an update names the fields it changes, which its write sets', () => {
    const changed = (r: StudentRow) => {
      const d = decide(r, 'patch');
      return d.kind === 'update' ? d.changedFields : d.kind;
    };
    assert.deepEqual(changed(patchRow({ email: 'ada@u.edu', cohort_name: 'ended' })), ['isAlumni', 'cohortId']);
    assert.deepEqual(changed(patchRow({ email: 'ada@u.edu', first_name: 'Ada', last_name: 'Byron', phone: '+15551234567' })), ['lastName', 'phone']);
    assert.deepEqual(changed(patchRow({ email: 'ada.new@u.edu', external_id: 'A1' })), []);
  });

  test('an unknown external_id is set on the email\'s student that has none', () => {
    const d = decide(patchRow({ email: 'bob@u.edu', external_id: 'B7' }), 'patch');
    assert.ok(d.kind === 'update');
    assert.equal(d.values.externalId, 'B7');
  });

  test('later rows reaching a student an earlier row reached, through another address, are DUPLICATE_IN_BATCH', () => {
    const rows = [row({ email: 'x@u.edu', external_id: 'X1' }), patchRow({ email: 'ada@u.edu', last_name: 'L1' }),
      patchRow({ email: 'ada.alt@u.edu', last_name: 'L2' }), row({ email: 'y@u.edu', external_id: 'A1' })].map((r, index) => ({ ...r, index }));
    const decisions = decideStudentBatch(rows, state, context('put'));
    assert.deepEqual(decisions.map((d) => (d.kind === 'reject' ? d.rejection.code : d.kind)),
      ['create', 'update', 'DUPLICATE_IN_BATCH', 'DUPLICATE_IN_BATCH']);
  });

  test('a row reaching the student of an earlier refused row is DUPLICATE_IN_BATCH', () => {
    const rows = [patchRow({ email: 'ada@u.edu', cohort_name: 'nope' }), patchRow({ email: 'ada.alt@u.edu', last_name: 'L2' }),
      patchRow({ email: 'bob@u.edu', external_id: 'A1' }), patchRow({ email: 'new@u.edu', external_id: 'A1' })].map((r, index) => ({ ...r, index }));
    const decisions = decideStudentBatch(rows, state, context('patch'));
    // The third names A1 with bob's address: a conflict, which reaches no one student.
    assert.deepEqual(decisions.map((d) => (d.kind === 'reject' ? d.rejection.code : d.kind)),
      ['COHORT_NOT_FOUND', 'DUPLICATE_IN_BATCH', 'EXTERNAL_ID_CONFLICT', 'DUPLICATE_IN_BATCH']);
  });
});

describe('student decisions: the is_alumni table', () => {
  const flagAfter = (d: ReturnType<typeof decide>) => (d.kind === 'create' || d.kind === 'update' ? d.values.isAlumni : null);
  const historyOf = (d: ReturnType<typeof decide>) => (d.kind === 'create' || d.kind === 'update' ? d.history.map((h) => `${h.reason}:${h.isAlumni}`) : []);

  test('partner is_alumni true on create: set at once, partner_api_push entry', () => {
    const d = decide(row({ email: 'n1@u.edu', is_alumni: true, cohort_name: 'ended' }), 'put');
    assert.equal(flagAfter(d), true);
    assert.deepEqual(historyOf(d), ['partner_api_push:true']);
    assert.deepEqual(historyOf(decide(row({ email: 'n3@u.edu', is_alumni: false, cohort_name: 'ended' }), 'put')), ['cohort_enrolment:true', 'partner_api_push:false']);
  });
  test('partner is_alumni false on update: cleared at once, partner_api_push entry', () => {
    const d = decide(patchRow({ email: 'carol@u.edu', is_alumni: false }), 'patch');
    assert.equal(flagAfter(d), false);
    assert.deepEqual(historyOf(d), ['partner_api_push:false']);
  });
  test('partner is_alumni true on update: set at once', () => {
    const d = decide(patchRow({ email: 'ada@u.edu', is_alumni: true }), 'patch');
    assert.equal(flagAfter(d), true);
    assert.deepEqual(historyOf(d), ['partner_api_push:true']);
  });
  test('an update sending the flag the student holds records partner_api_push; an unchanged row records nothing', () => {
    assert.deepEqual(historyOf(decide(patchRow({ email: 'ada@u.edu', last_name: 'Byron', is_alumni: false }), 'patch')), ['partner_api_push:false']);
    // A move that derives the value the partner sends: the derivation changes nothing, the push is recorded.
    assert.deepEqual(historyOf(decide(patchRow({ email: 'carol@u.edu', cohort_name: 'ended', is_alumni: true }), 'patch')), ['partner_api_push:true']);
    assert.equal(decide(patchRow({ email: 'ada@u.edu', is_alumni: false }), 'patch').kind, 'unchanged');
  });
  test('is_alumni omitted on PATCH: the flag is untouched', () => {
    const d = decide(patchRow({ email: 'carol@u.edu', phone: '+15551234567' }), 'patch');
    assert.equal(flagAfter(d), true);
    assert.deepEqual(historyOf(d), []);
  });
  test('is_alumni omitted on create: the row is refused', () => {
    const validated = validateStudentRow({ email: 'n@u.edu', first_name: 'A', last_name: 'B', cohort_name: 'running' }, 0, 'put');
    assert.ok('rejected' in validated && validated.rejected.code === 'MISSING_IS_ALUMNI');
  });
  test('only graduation_date: stored, flag untouched, no derivation', () => {
    const d = decide(patchRow({ email: 'ada@u.edu', graduation_date: '2020-06-30' }), 'patch');
    assert.ok(d.kind === 'update');
    assert.deepEqual([d.values.graduationDate, d.values.isAlumni, d.history.length], ['2020-06-30', false, 0]);
  });
  test('a move into an ended cohort derives true (cohort_move)', () => {
    const d = decide(patchRow({ email: 'ada@u.edu', cohort_name: 'ended' }), 'patch');
    assert.equal(flagAfter(d), true);
    assert.deepEqual(historyOf(d), ['cohort_move:true']);
  });
  test('a move derives first and a sent value is applied on top, with a note when they disagree', () => {
    const d = decide(patchRow({ email: 'ada@u.edu', cohort_name: 'ended', is_alumni: false }), 'patch');
    assert.ok(d.kind === 'update');
    assert.equal(d.values.isAlumni, false);
    assert.deepEqual(historyOf(d), ['cohort_move:true', 'partner_api_push:false']);
    assert.match(d.notes[0], /applied as sent \(false\).*cohort end_date 2022-06-30 implies true; a later move to another cohort or a graduation date set in the app, or the student's next sign-in, will re-derive/);
  });
  test('a move can clear a wrong true; a future graduation date outranks an ended cohort', () => {
    assert.equal(flagAfter(decide(patchRow({ email: 'carol@u.edu', cohort_name: 'ended', graduation_date: '2999-01-01' }), 'patch')), false);
    assert.equal(flagAfter(decide(patchRow({ email: 'carol@u.edu', cohort_name: 'ended' }), 'patch')), true);
  });
  test('a sent value that agrees with the dates carries no note', () => {
    const d = decide(row({ email: 'n2@u.edu', is_alumni: true, graduation_date: '2021-06-30' }), 'put');
    assert.deepEqual(d.kind === 'create' ? d.notes : null, []);
  });
});

describe('cohort rows', () => {
  const existing: CohortRecord = {
    id: 'k1', name: 'cs', display_name: 'CS', program: 'Computer Science', degree: 'BSc', start_date: '2024-09-01', end_date: '2027-06-30',
    intake_year: 2024, intake_term: 'Fall', campus_name: null, study_mode: null, resume_template_names: [],
  };
  const cohortState: CohortBatchState = {
    cohortsByName: new Map([['cs', [existing]], ['twin', [existing, { ...existing, id: 'k2' }]]]),
    campusIdsByName: new Map([['Main', 'campus-1']]),
    templateNames: new Set(['Classic']),
  };
  const full = { display_name: 'D', program: 'P', degree: 'BSc', start_date: '2025-09-01', end_date: '2028-06-30', intake_year: 2025, intake_term: 'Spring' };
  const outcome = (rows: Record<string, unknown>[], mode: WriteMode) => {
    const valid = [];
    const codes: string[] = [];
    for (const [index, r] of rows.entries()) {
      const v = validateCohortRow(r, index, mode);
      if ('ok' in v) valid.push(v.ok);
      else codes[index] = v.rejected.code;
    }
    for (const d of decideCohortBatch(valid, cohortState, mode, () => 'new')) codes[d.row.index] = d.kind === 'reject' ? d.rejection.code : d.kind;
    return codes;
  };
  const cases: [string, Record<string, unknown>[], WriteMode, string[]][] = [
    ['PUT of a known name updates the fields it sends, one the batch created too', [{ name: 'new', ...full }, { name: 'new', display_name: 'E' }, { name: 'cs', program: 'Informatics' }], 'put', ['create', 'update', 'update']],
    ['PUT of a new name needs every create field, whatever comes later in the batch', [{ name: 'new', display_name: 'E' }, { name: 'new', ...full }], 'put', ['MISSING_FIELD', 'create']],
    ['POST needs every create field before the name is looked up', [{ name: 'cs', display_name: 'E' }], 'post', ['MISSING_FIELD']],
    ['PUT then PATCH-like row in one batch', [{ name: 'new', ...full }, { name: 'new', ...full, display_name: 'E' }], 'put', ['create', 'update']],
    ['POST of an existing name', [{ name: 'cs', ...full }], 'post', ['ALREADY_EXISTS']],
    ['PATCH of an unknown name', [{ name: 'zz', display_name: 'x' }], 'patch', ['NOT_FOUND']],
    ['a shared name', [{ name: 'twin', display_name: 'x' }], 'patch', ['NAME_AMBIGUOUS']],
    ['an unknown campus', [{ name: 'cs', campus_name: 'Atlantis' }], 'patch', ['CAMPUS_NOT_FOUND']],
    ['an unknown template on create', [{ name: 'new', ...full, resume_template_names: ['Fancy'] }], 'put', ['UNKNOWN_TEMPLATE']],
    ['an unknown template on update', [{ name: 'cs', resume_template_names: ['Fancy'] }], 'patch', ['update']],
    ['one date inverting the stored range', [{ name: 'cs', start_date: '2027-07-01' }], 'patch', ['INVALID_DATE_RANGE']],
    ['nothing new', [{ name: 'cs', display_name: 'CS' }], 'patch', ['unchanged']],
    ['null on a required field', [{ name: 'cs', degree: null }], 'patch', ['INVALID_FIELD']],
    ['an intake term outside the four', [{ name: 'new', ...full, intake_term: 'fall' }], 'put', ['INVALID_FIELD']],
    ['a blank name', [{ name: '', ...full }], 'put', ['INVALID_NAME']],
    ['no name, a field a create needs and every row\'s key', [full, full, { display_name: 'x' }], 'put', ['MISSING_FIELD', 'MISSING_FIELD', 'MISSING_FIELD']],
    ['a name that is null or not a string', [{ ...full, name: null }, { ...full, name: 42 }, { name: ['cs'], display_name: 'x' }], 'put', ['INVALID_FIELD', 'INVALID_FIELD', 'INVALID_FIELD']],
    ['a name with a return and a line break at its end, trimmed', [{ name: 'cs\r\n', display_name: 'CS' }], 'patch', ['unchanged']],
    ['a template name with spaces around it, on create', [{ name: 'new', ...full, resume_template_names: [' Classic '] }], 'put', ['create']],
    ['a name and a display_name of 200 characters with spaces around them', [{ ...full, name: `  ${'n'.repeat(200)}  `, display_name: ` ${'d'.repeat(200)} ` }], 'put', ['create']],
    ['a name of 201 characters once trimmed', [{ ...full, name: ` ${'n'.repeat(201)} ` }], 'put', ['INVALID_NAME']],
    ['the templates the cohort holds (none), then a blank template name', [{ name: 'cs', resume_template_names: [] }, { name: 'cs', resume_template_names: ['  '] }], 'patch', ['unchanged', 'INVALID_FIELD']],
  ];
  for (const [name, rows, mode, expected] of cases) test(`${name} → ${expected.join(', ')}`, () => assert.deepEqual(outcome(rows, mode), expected));

  test('template names are stored trimmed, each once; a blank one is refused, named by its place', () => {
    const valid = validateCohortRow({ name: 'cs', resume_template_names: [' Classic', 'Modern ', 'Classic'] }, 0, 'patch');
    assert.deepEqual('ok' in valid ? valid.ok.fields.resume_template_names : valid.rejected, ['Classic', 'Modern']);
    const blank = validateCohortRow({ name: 'cs', resume_template_names: ['Classic', ' '] }, 0, 'patch');
    assert.deepEqual('rejected' in blank ? blank.rejected : null, { code: 'INVALID_FIELD', message: 'resume_template_names[1] must not be blank.' });
  });
});

describe('settleRaces: a row that loses twice is reported', () => {
  const rows = [{ index: 0 }, { index: 1 }, { index: 2 }];
  test('a row that loses once is decided again and settles', async () => {
    let round = 0;
    const losers = await settleRaces(rows, async (pending) => (round++ === 0 ? new Set(pending.filter((r) => r.index === 1).map((r) => r.index)) : new Set()));
    assert.deepEqual(losers, []);
    assert.equal(round, 2);
  });
  test('a row that loses on the retry too is left for CONCURRENT_WRITE', async () => {
    const attempts: number[][] = [];
    const losers = await settleRaces(rows, async (pending) => {
      attempts.push(pending.map((r) => r.index));
      return new Set([2]);
    });
    assert.deepEqual(losers, [{ index: 2 }]);
    assert.deepEqual(attempts, [[0, 1, 2], [2]]);
  });
});
