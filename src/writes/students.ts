/**
 * Student batch rules (spec 'Student (write shape)', 'States and transitions'; decisions D4),
 * as pure functions: validate a row, then decide it against the batch's current state.
 */
import { type AlumniChange, alumniChanges, impliedAlumni } from '../domain/alumni.ts';
import {
  MAX_EMAIL_LENGTH, MAX_EXTERNAL_ID_LENGTH, MAX_NAME_LENGTH, MAX_PHONE_LENGTH, hasControlCharacter, textProblem,
} from '../domain/text.ts';
import { type Rejection, type RowStatus, type WriteMode, isBlank, isIsoDate, reject } from './batch.ts';

/** The fields a student record holds; every other sent key is reported in dropped_fields. */
export const STUDENT_FIELDS: ReadonlySet<string> = new Set([
  'email', 'first_name', 'last_name', 'cohort_name', 'is_alumni', 'external_id', 'phone', 'graduation_date',
]);

/**
 * The longest value each string field takes, in characters. email and phone have codes of
 * their own (INVALID_EMAIL, INVALID_PHONE); a violation of any other is INVALID_FIELD.
 */
export const STUDENT_TEXT_FIELDS = {
  email: MAX_EMAIL_LENGTH,
  first_name: MAX_NAME_LENGTH,
  last_name: MAX_NAME_LENGTH,
  cohort_name: MAX_NAME_LENGTH,
  external_id: MAX_EXTERNAL_ID_LENGTH,
  phone: MAX_PHONE_LENGTH,
} as const satisfies Record<string, number>;

const EMAIL = /^[^\s@"(),:;<>[\\\]]+@[^\s@"(),:;<>[\\\]]+\.[^\s@"(),:;<>[\\\]]+$/;
const E164 = /^\+[1-9]\d{1,14}$/;

/** A row that passed validation. Absent fields are `undefined`; null means "clear". */
export interface StudentRow {
  readonly index: number;
  /** As sent, for the result row; `email` is trimmed and lower-cased. */
  readonly sentEmail: string;
  readonly email: string;
  readonly firstName?: string;
  readonly lastName?: string;
  readonly cohortName?: string;
  readonly isAlumni?: boolean;
  readonly externalId?: string | null;
  readonly phone?: string | null;
  readonly graduationDate?: string | null;
}

export type ValidatedStudentRow = { ok: StudentRow } | { rejected: Rejection; sentEmail: string | null };

export function validateStudentRow(raw: unknown, index: number, mode: WriteMode): ValidatedStudentRow {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return { rejected: reject('INVALID_FIELD', 'Each row must be a JSON object.'), sentEmail: null };
  }
  const row = raw as Record<string, unknown>;
  const sentEmail = typeof row.email === 'string' ? row.email : null;
  const fail = (code: string, message: string): ValidatedStudentRow => ({ rejected: reject(code, message), sentEmail });

  if (sentEmail === null || sentEmail.trim().length > STUDENT_TEXT_FIELDS.email || !EMAIL.test(sentEmail.trim()) || hasControlCharacter(sentEmail)) {
    return fail('INVALID_EMAIL', row.email === undefined ? 'email is required.' : 'email is not a valid address.');
  }
  for (const field of ['first_name', 'last_name', 'cohort_name', 'external_id'] as const) {
    if (row[field] !== undefined && row[field] !== null && typeof row[field] !== 'string') return fail('INVALID_FIELD', `${field} must be a string.`);
  }
  if (row.is_alumni !== undefined && typeof row.is_alumni !== 'boolean' && !(row.is_alumni === null && mode !== 'patch')) {
    return fail('INVALID_FIELD', 'is_alumni must be true or false.');
  }
  if (row.graduation_date !== undefined && row.graduation_date !== null && !isIsoDate(row.graduation_date)) {
    return fail('INVALID_FIELD', 'graduation_date must be a date in YYYY-MM-DD form, or null.');
  }
  if (typeof row.external_id === 'string' && isBlank(row.external_id)) return fail('INVALID_FIELD', 'external_id must not be blank; send null to clear it.');

  const creating = mode !== 'patch';
  for (const field of ['first_name', 'last_name'] as const) {
    const value = row[field];
    if ((creating && value === undefined) || value === null || (typeof value === 'string' && isBlank(value))) {
      return fail('MISSING_NAME', `${field} is required and must not be blank.`);
    }
  }
  if (row.phone !== undefined && row.phone !== null && (typeof row.phone !== 'string' || !E164.test(row.phone))) {
    return fail('INVALID_PHONE', 'phone must be in E.164 form (a leading + and the country code), or null.');
  }
  const cohortName = row.cohort_name;
  if ((creating && cohortName === undefined) || cohortName === null || (typeof cohortName === 'string' && isBlank(cohortName))) {
    return fail('MISSING_COHORT', 'cohort_name is required and must name a cohort of the university.');
  }
  if (creating && (row.is_alumni === undefined || row.is_alumni === null)) {
    return fail('MISSING_IS_ALUMNI', 'is_alumni is required when a student is created.');
  }
  for (const [field, maxLength] of Object.entries(STUDENT_TEXT_FIELDS)) {
    const problem = typeof row[field] === 'string' ? textProblem(field, row[field], maxLength) : null;
    if (problem) return fail('INVALID_FIELD', problem);
  }

  return {
    ok: {
      index,
      sentEmail,
      email: sentEmail.trim().toLowerCase(),
      firstName: (row.first_name as string | undefined)?.trim(),
      lastName: (row.last_name as string | undefined)?.trim(),
      cohortName: (cohortName as string | undefined)?.trim(),
      isAlumni: row.is_alumni as boolean | undefined,
      externalId: typeof row.external_id === 'string' ? row.external_id.trim() : (row.external_id as null | undefined),
      phone: row.phone as string | null | undefined,
      graduationDate: row.graduation_date as string | null | undefined,
    },
  };
}

/** A student of the caller's university as it stands. */
export interface StudentRecord {
  readonly id: string;
  readonly email: string;
  readonly externalId: string | null;
  readonly firstName: string;
  readonly lastName: string;
  readonly phone: string | null;
  readonly graduationDate: string | null;
  readonly isAlumni: boolean;
  readonly cohortId: string | null;
  readonly cohortEndDate: string | null;
}

export interface CohortRef {
  readonly id: string;
  readonly endDate: string;
}

/** Who holds an address anywhere in the service (see pds_email_owners). */
export interface EmailOwner {
  readonly kind: 'student' | 'staff' | 'self_serve';
  readonly inScope: boolean;
  readonly erased: boolean;
}

export interface StudentBatchState {
  /** Students of the university by primary and by secondary address. */
  readonly byEmail: ReadonlyMap<string, StudentRecord>;
  readonly byExternalId: ReadonlyMap<string, StudentRecord>;
  readonly emailOwners: ReadonlyMap<string, readonly EmailOwner[]>;
  readonly erasedExternalIds: ReadonlySet<string>;
  readonly cohortsByName: ReadonlyMap<string, readonly CohortRef[]>;
}

export interface StudentValues {
  readonly email: string;
  readonly firstName: string;
  readonly lastName: string;
  readonly externalId: string | null;
  readonly phone: string | null;
  readonly graduationDate: string | null;
  readonly isAlumni: boolean;
  readonly cohortId: string;
}

export type StudentDecision =
  | { readonly kind: 'reject'; readonly row: StudentRow; readonly rejection: Rejection }
  | { readonly kind: 'unchanged'; readonly row: StudentRow; readonly id: string; readonly cohortId: string | null; readonly notes: string[] }
  | {
      readonly kind: 'create' | 'update';
      readonly row: StudentRow;
      readonly id: string;
      readonly values: StudentValues;
      readonly history: readonly AlumniChange[];
      readonly secondaryEmail: string | null;
      readonly notes: string[];
    };

export interface StudentDecisionContext {
  readonly mode: WriteMode;
  readonly today: string;
  readonly newId: () => string;
}

function ownerRejection(owners: readonly EmailOwner[] | undefined): Rejection | null {
  if (!owners || owners.length === 0) return null;
  if (owners.some((o) => o.erased)) return reject('ACCOUNT_DELETED', 'The address belongs to an erased account, which cannot be recreated through the API.');
  if (owners.some((o) => o.kind === 'staff')) return reject('EMAIL_BELONGS_TO_NON_STUDENT', 'The address belongs to a staff account.');
  if (owners.some((o) => o.kind === 'student' && !o.inScope)) {
    return reject('EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY', 'The address is an account of another university; it is never adopted.');
  }
  return reject('EMAIL_BELONGS_TO_EXISTING_ACCOUNT', 'The address belongs to a user who is not on your roster; do not retry.');
}

function resolveCohort(name: string, state: StudentBatchState): CohortRef | Rejection {
  const matches = state.cohortsByName.get(name) ?? [];
  if (matches.length === 0) return reject('COHORT_NOT_FOUND', `No cohort named "${name}" at your university; create it first with POST /v1/cohorts.`);
  if (matches.length > 1) return reject('COHORT_NAME_AMBIGUOUS', `${matches.length} cohorts share the name "${name}".`);
  return matches[0];
}

const isRejection = (x: CohortRef | Rejection): x is Rejection => 'code' in x;

function alumniNote(isAlumni: boolean, graduationDate: string | null, cohortEndDate: string | null, implied: boolean): string {
  const basis = graduationDate !== null
    ? `the graduation_date ${graduationDate} implies ${implied}`
    : cohortEndDate !== null ? `with no graduation_date, the cohort end_date ${cohortEndDate} implies ${implied}` : `the dates imply ${implied}`;
  return `is_alumni was applied as sent (${isAlumni}), but ${basis}; a later cohort or graduation-date change will re-derive the flag and overwrite it.`;
}

const secondaryNote = (email: string) =>
  `${email} was recorded as a secondary address of the student matched by external_id; it is not a login or the contact address until the student verifies it.`;

/** Which student, if any, the row addresses; or why it cannot be matched. */
function matchStudent(row: StudentRow, state: StudentBatchState): { target: StudentRecord | null; addSecondary: boolean } | Rejection {
  const byEmail = state.byEmail.get(row.email) ?? null;
  if (row.externalId) {
    const byExternalId = state.byExternalId.get(row.externalId) ?? null;
    if (byExternalId) {
      if (byEmail?.id === byExternalId.id) return { target: byExternalId, addSecondary: false };
      if (byEmail) return reject('EXTERNAL_ID_CONFLICT', 'The external_id belongs to a different student than this email; no merge is made.');
      const owned = ownerRejection(state.emailOwners.get(row.email));
      if (owned) return owned;
      return { target: byExternalId, addSecondary: true };
    }
    if (state.erasedExternalIds.has(row.externalId)) {
      return reject('ACCOUNT_DELETED', 'The external_id belongs to an erased account, which cannot be recreated through the API.');
    }
    if (byEmail && byEmail.externalId !== null) {
      return reject('EXTERNAL_ID_CONFLICT', 'The email belongs to a student with a different external_id; a student number is never re-keyed.');
    }
  }
  if (byEmail) return { target: byEmail, addSecondary: false };
  const erased = state.emailOwners.get(row.email)?.some((o) => o.erased);
  if (erased) return reject('ACCOUNT_DELETED', 'The address belongs to an erased account, which cannot be recreated through the API.');
  return { target: null, addSecondary: false };
}

export function decideStudentRow(row: StudentRow, state: StudentBatchState, context: StudentDecisionContext): StudentDecision {
  const rejected = (rejection: Rejection): StudentDecision => ({ kind: 'reject', row, rejection });
  const match = matchStudent(row, state);
  if ('code' in match) return rejected(match);
  const { target } = match;

  if (!target) {
    if (context.mode === 'patch') return rejected(reject('NOT_FOUND', 'No student matches the external_id or email; PATCH never creates.'));
    const owned = ownerRejection(state.emailOwners.get(row.email));
    if (owned) return rejected(owned);
    const cohort = resolveCohort(row.cohortName!, state);
    if (isRejection(cohort)) return rejected(cohort);
    const graduationDate = row.graduationDate ?? null;
    const implied = impliedAlumni(graduationDate, cohort.endDate, context.today);
    const isAlumni = row.isAlumni!;
    return {
      kind: 'create', row, id: context.newId(), secondaryEmail: null,
      values: {
        email: row.email, firstName: row.firstName!, lastName: row.lastName!, externalId: row.externalId ?? null,
        phone: row.phone ?? null, graduationDate, isAlumni, cohortId: cohort.id,
      },
      // The enrolment derives the flag, then the partner's value applies on top; the history
      // keeps the derived value only when the partner's differs from it.
      history: [...(implied === isAlumni ? [] : [{ isAlumni: implied, reason: 'cohort_enrolment' as const }]), { isAlumni, reason: 'partner_api_push' }],
      notes: isAlumni === implied ? [] : [alumniNote(isAlumni, graduationDate, cohort.endDate, implied)],
    };
  }

  if (context.mode === 'post') return rejected(reject('ALREADY_EXISTS', 'The student exists already; POST creates only, and nothing was written.'));

  let cohortId = target.cohortId;
  let cohortEndDate = target.cohortEndDate;
  const steps: AlumniChange[] = [];
  const graduationDate = row.graduationDate !== undefined ? row.graduationDate : target.graduationDate;
  if (row.cohortName !== undefined) {
    const cohort = resolveCohort(row.cohortName, state);
    if (isRejection(cohort)) return rejected(cohort);
    if (cohort.id !== target.cohortId) {
      steps.push({ isAlumni: impliedAlumni(graduationDate, cohort.endDate, context.today), reason: target.cohortId === null ? 'cohort_enrolment' : 'cohort_move' });
      cohortId = cohort.id;
      cohortEndDate = cohort.endDate;
    }
  }
  if (row.isAlumni !== undefined) steps.push({ isAlumni: row.isAlumni, reason: 'partner_api_push' });
  const history = alumniChanges(target.isAlumni, steps);
  const isAlumni = steps.length > 0 ? steps[steps.length - 1].isAlumni : target.isAlumni;

  const notes: string[] = [];
  const implied = impliedAlumni(graduationDate, cohortEndDate, context.today);
  if (row.isAlumni !== undefined && row.isAlumni !== implied) notes.push(alumniNote(row.isAlumni, graduationDate, cohortEndDate, implied));
  if (match.addSecondary) notes.push(secondaryNote(row.email));

  const values: StudentValues = {
    email: target.email,
    firstName: row.firstName ?? target.firstName,
    lastName: row.lastName ?? target.lastName,
    externalId: row.externalId !== undefined ? row.externalId : target.externalId,
    phone: row.phone !== undefined ? row.phone : target.phone,
    graduationDate,
    isAlumni,
    cohortId: cohortId!,
  };
  const changed = match.addSecondary || history.length > 0 || values.firstName !== target.firstName || values.lastName !== target.lastName
    || values.externalId !== target.externalId || values.phone !== target.phone || values.graduationDate !== target.graduationDate
    || values.isAlumni !== target.isAlumni || values.cohortId !== target.cohortId;
  if (!changed) return { kind: 'unchanged', row, id: target.id, cohortId: target.cohortId, notes };
  return { kind: 'update', row, id: target.id, values, history, secondaryEmail: match.addSecondary ? row.email : null, notes };
}

/**
 * Decides every row in request order. Later rows naming an email, external_id or student an
 * earlier row already named are DUPLICATE_IN_BATCH.
 */
export function decideStudentBatch(rows: readonly StudentRow[], state: StudentBatchState, context: StudentDecisionContext): StudentDecision[] {
  const seenKeys = new Set<string>();
  const seenStudents = new Set<string>();
  return rows.map((row) => {
    const keys = [`email:${row.email}`, ...(row.externalId ? [`external_id:${row.externalId}`] : [])];
    const duplicate = keys.some((k) => seenKeys.has(k));
    keys.forEach((k) => seenKeys.add(k));
    if (duplicate) return { kind: 'reject', row, rejection: reject('DUPLICATE_IN_BATCH', 'An earlier row of this batch names the same email or external_id; nothing was written for this row.') };
    const decision = decideStudentRow(row, state, context);
    if (decision.kind === 'reject' || decision.kind === 'create') return decision;
    if (seenStudents.has(decision.id)) {
      return { kind: 'reject', row, rejection: reject('DUPLICATE_IN_BATCH', 'An earlier row of this batch addresses the same student; nothing was written for this row.') };
    }
    seenStudents.add(decision.id);
    return decision;
  });
}

export interface StudentResult {
  email: string | null;
  status: RowStatus;
  id?: string;
  cohort_id?: string | null;
  code?: string;
  message?: string;
  notes?: string[];
}

export function studentResult(decision: StudentDecision): StudentResult {
  const email = decision.row.sentEmail;
  switch (decision.kind) {
    case 'reject':
      return { email, status: 'rejected', code: decision.rejection.code, message: decision.rejection.message };
    case 'unchanged':
      return { email, status: 'unchanged', id: decision.id, cohort_id: decision.cohortId, ...(decision.notes.length ? { notes: decision.notes } : {}) };
    default:
      return {
        email, status: decision.kind === 'create' ? 'created' : 'updated', id: decision.id, cohort_id: decision.values.cohortId,
        ...(decision.notes.length ? { notes: decision.notes } : {}),
      };
  }
}
