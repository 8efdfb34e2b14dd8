import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { alumniAfterSignIn, alumniChanges, impliedAlumni, todayUtc } from '../src/domain/alumni.ts';

const today = '2026-11-22';

describe('impliedAlumni: what the dates imply', () => {
  const cases: [string, string | null, string | null, boolean][] = [
    ['graduation date before today gives true', '2026-11-21', null, true],
    ['graduation date today is not yet before today', '2026-11-22', '2020-01-01', false],
    ['a future graduation date gives false even when the cohort has ended', '2027-06-30', '2020-06-30', false],
    ['no date and a cohort end_date in the past gives true', null, '2026-06-30', true],
    ['no date and a cohort still running gives false', null, '2027-06-30', false],
    ['no date and no cohort gives false', null, null, false],
  ];
  for (const [name, graduation, cohortEnd, expected] of cases) {
    test(name, () => assert.equal(impliedAlumni(graduation, cohortEnd, today), expected));
  }
});

describe('sign-in derivation', () => {
  test('a computed true turns false into true', () => assert.equal(alumniAfterSignIn(false, true), true));
  test('a computed false never clears a true flag', () => assert.equal(alumniAfterSignIn(true, false), true));
  test('false stays false when nothing implies alumni', () => assert.equal(alumniAfterSignIn(false, false), false));
});

describe('alumniChanges: one history entry per change of the flag', () => {
  test('a derivation then a partner value on top each count when they change the flag', () => {
    assert.deepEqual(alumniChanges(true, [{ isAlumni: false, reason: 'cohort_move' }, { isAlumni: true, reason: 'partner_api_push' }]),
      [{ isAlumni: false, reason: 'cohort_move' }, { isAlumni: true, reason: 'partner_api_push' }]);
  });
  test('steps that leave the flag as it is write nothing', () => {
    assert.deepEqual(alumniChanges(false, [{ isAlumni: false, reason: 'cohort_move' }, { isAlumni: false, reason: 'partner_api_push' }]), []);
  });
});

test('todayUtc is the ISO date in UTC', () => {
  assert.equal(todayUtc(new Date('2026-11-22T23:59:59-05:00')), '2026-11-23');
});
