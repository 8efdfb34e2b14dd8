/**
 * The is_alumni flag (docs/decisions.md, "The alumni flag"). The derivation is pure; it runs at
 * exactly four moments: sign-in, graduation date set in the app, enrolment, move.
 */
export type AlumniReason = 'partner_api_push' | 'sign_in' | 'graduation_date_set' | 'cohort_enrolment' | 'cohort_move';

/** Dates are ISO `YYYY-MM-DD` strings, so string order is date order. */
export function todayUtc(now: Date = new Date()): string {
  return now.toISOString().slice(0, 10);
}

/**
 * What the dates imply: a graduation date before today gives true; with no date, a cohort
 * end_date in the past gives true; otherwise false.
 */
export function impliedAlumni(graduationDate: string | null, cohortEndDate: string | null, today: string): boolean {
  if (graduationDate !== null) return graduationDate < today;
  if (cohortEndDate !== null) return cohortEndDate < today;
  return false;
}

/** Sign-in may set the flag but never clears it. */
export function alumniAfterSignIn(current: boolean, implied: boolean): boolean {
  return current || implied;
}

export interface AlumniChange {
  readonly isAlumni: boolean;
  readonly reason: AlumniReason;
}

/** One history entry per change of the flag. */
export function alumniChanges(current: boolean, steps: readonly AlumniChange[]): AlumniChange[] {
  const changes: AlumniChange[] = [];
  let value = current;
  for (const step of steps) {
    if (step.isAlumni !== value) changes.push(step);
    value = step.isAlumni;
  }
  return changes;
}
