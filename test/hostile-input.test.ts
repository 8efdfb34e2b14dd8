/**
 * The pure rules that keep hostile strings out of the store: every string field's maximum
 * length and character check, row by row, on student and cohort rows.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_EXTERNAL_ID_LENGTH, MAX_NAME_LENGTH, textProblem } from '../src/resources/text.ts';
import type { WriteMode } from '../src/writes/batch.ts';
import { validateCohortRow } from '../src/writes/cohort-rules.ts';
import { validateStudentRow } from '../src/writes/student-rows.ts';

const NUL = 'a\u0000b';

describe('textProblem', () => {
  const cases: [string, string, number, RegExp | null][] = [
    ['plain text', 'Ada Lovelace', 200, null],
    ['exactly the limit', 'x'.repeat(200), 200, null],
    ['one over the limit', 'x'.repeat(201), 200, /at most 200 characters/],
    ['astral characters count once each', '😀'.repeat(200), 200, null],
    ['a NUL', NUL, 200, /control characters/],
    ['a line break', 'a\nb', 200, /control characters/],
    ['a tab', 'a\tb', 200, /control characters/],
    ['DEL', 'a\u007fb', 200, /control characters/],
    ['a C1 control', 'a\u0085b', 200, /control characters/],
    ['accents and non-Latin scripts', 'Zoë Ångström 李', 200, null],
    ['an unpaired high surrogate', 'a\ud800b', 200, /unpaired surrogate/],
    ['an unpaired low surrogate at the end', 'ab\udfff', 200, /unpaired surrogate/],
    ['a surrogate pair reversed', 'a\ude00\ud83d', 200, /unpaired surrogate/],
    ['a control character and an unpaired surrogate', 'a\u0000\ud800', 200, /control characters/],
    ['a tab, a return and a line break at either end, which trimming removes', '\tAda\r\n', 200, null],
    ['a line separator at the end, which trimming removes', 'Ada\u2028', 200, null],
    ['a NUL at the end, which trimming keeps', 'Ada\u0000', 200, /control characters/],
  ];
  for (const [name, value, max, expected] of cases) {
    test(`${name} → ${expected ?? 'accepted'}`, () => {
      const problem = textProblem('first_name', value, max);
      if (expected === null) assert.equal(problem, null);
      else assert.match(problem ?? '', expected);
    });
  }
});

describe('validateStudentRow: hostile strings', () => {
  const base = { email: 'ada@u.edu', first_name: 'Ada', last_name: 'Lovelace', cohort_name: 'cs', is_alumni: false };
  const cases: [string, Record<string, unknown>, WriteMode, string | null, RegExp | null][] = [
    ['a NUL in first_name', { ...base, first_name: NUL }, 'put', 'INVALID_FIELD', /^first_name /],
    ['a NUL in last_name', { ...base, last_name: NUL }, 'put', 'INVALID_FIELD', /^last_name /],
    ['a NUL in cohort_name', { ...base, cohort_name: NUL }, 'put', 'INVALID_FIELD', /^cohort_name /],
    ['a NUL in external_id', { ...base, external_id: NUL }, 'put', 'INVALID_FIELD', /^external_id /],
    ['a NUL in the email', { ...base, email: 'a\u0000b@u.edu' }, 'put', 'INVALID_EMAIL', null],
    ['an unpaired surrogate in the email', { ...base, email: 'a\ud800@u.edu' }, 'put', 'INVALID_EMAIL', null],
    ['an unpaired surrogate in external_id', { ...base, external_id: 'E\udfff' }, 'put', 'INVALID_FIELD',
      /^external_id .*unpaired surrogate/],
    ['a NUL in the phone', { email: 'a@u.edu', phone: '+44\u00007700' }, 'patch', 'INVALID_PHONE', null],
    ['a line break in last_name on PATCH', { email: 'a@u.edu', last_name: 'L\nM' }, 'patch', 'INVALID_FIELD', /^last_name .*control/],
    ['an external_id of 3,200 characters', { ...base, external_id: 'x'.repeat(3200) }, 'put', 'INVALID_FIELD', /^external_id must be at most 100 /],
    ['an external_id at the limit', { ...base, external_id: 'x'.repeat(MAX_EXTERNAL_ID_LENGTH) }, 'put', null, null],
    ['a first_name over the limit', { ...base, first_name: 'x'.repeat(MAX_NAME_LENGTH + 1) }, 'put', 'INVALID_FIELD', /^first_name must be at most 200 /],
    ['a cohort_name over the limit', { ...base, cohort_name: 'x'.repeat(MAX_NAME_LENGTH + 1) }, 'put', 'INVALID_FIELD', /^cohort_name /],
    ['an email over 254 characters', { ...base, email: `${'a'.repeat(60)}@${['b', 'c', 'd'].map((c) => c.repeat(63)).join('.')}.org` }, 'put', 'INVALID_EMAIL', null],
    // `İ` lower-cases to `i` and a combining dot: 247 characters as sent, 443 as stored.
    ['an email whose lower-cased key is over 254 characters', { ...base, email: `${'a'.repeat(40)}@${Array(7).fill('İ'.repeat(28)).join('.')}.edu` }, 'put', 'INVALID_EMAIL', null],
    ['an email of 254 characters once lower-cased', { ...base, email: `${'a'.repeat(22)}@${Array(4).fill('İ'.repeat(28)).join('.')}.edu` }, 'put', null, null],
  ];
  for (const [name, fields, mode, code, message] of cases) {
    test(`${name} → ${code ?? 'valid'}`, () => {
      const validated = validateStudentRow(fields, 0, mode);
      assert.equal('rejected' in validated ? validated.rejected.code : null, code);
      if (message && 'rejected' in validated) assert.match(validated.rejected.message, message);
    });
  }
});

describe('validateCohortRow: hostile strings', () => {
  const base = {
    name: 'cs-2025', display_name: 'CS', program: 'Computer Science', degree: 'BSc', start_date: '2025-09-01',
    end_date: '2028-06-30', intake_year: 2025, intake_term: 'Fall',
  };
  const cases: [string, Record<string, unknown>, string | null, RegExp | null][] = [
    ['a NUL in the name', { ...base, name: NUL }, 'INVALID_NAME', null],
    ['a C1 control in the name', { ...base, name: 'a\u0085b' }, 'INVALID_NAME', null],
    ['an unpaired surrogate in the name', { ...base, name: 'sur\ud800c' }, 'INVALID_NAME', null],
    ['a NUL in display_name', { ...base, display_name: NUL }, 'INVALID_FIELD', /^display_name /],
    ['a NUL in program', { ...base, program: NUL }, 'INVALID_FIELD', /^program /],
    ['a line break in degree', { ...base, degree: 'B\nSc' }, 'INVALID_FIELD', /^degree /],
    ['a NUL in campus_name', { ...base, campus_name: NUL }, 'INVALID_FIELD', /^campus_name /],
    ['a NUL in a template name', { ...base, resume_template_names: ['Classic', NUL] }, 'INVALID_FIELD', /^resume_template_names\[1\] /],
    ['a display_name over the limit', { ...base, display_name: 'x'.repeat(MAX_NAME_LENGTH + 1) }, 'INVALID_FIELD', /^display_name must be at most 200 /],
    ['a template name over the limit', { ...base, resume_template_names: ['x'.repeat(3000)] }, 'INVALID_FIELD', /^resume_template_names\[0\] must be at most 200 /],
    ['a campus_name over the limit', { ...base, campus_name: 'x'.repeat(MAX_NAME_LENGTH + 1) }, 'INVALID_FIELD', /^campus_name /],
    ['every field at its limit', { ...base, display_name: 'x'.repeat(MAX_NAME_LENGTH), resume_template_names: ['y'.repeat(MAX_NAME_LENGTH)] }, null, null],
  ];
  for (const [name, fields, code, message] of cases) {
    test(`${name} → ${code ?? 'valid'}`, () => {
      const validated = validateCohortRow(fields, 0, 'put');
      assert.equal('rejected' in validated ? validated.rejected.code : null, code);
      if (message && 'rejected' in validated) assert.match(validated.rejected.message, message);
    });
  }
});
