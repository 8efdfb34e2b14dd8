/**
 * Student batch rules (docs/decisions.md, "Student writes" and "The alumni flag") as pure
 * functions: a validated row (src/writes/student-rows.ts) decided against the batch's current
 * state.
 */
import { type AlumniChange, alumniChanges, impliedAlumni } from '../domain/alumni.ts';
import type { AccountKind } from '../domain/onboarding.ts';
import { type RowStatus, STATUS_OF_DECISION, type WriteMode, echoedKey, reject } from './batch.ts';
import { STUDENT_ROW_CODES, type StudentRowCode } from './row-codes.ts';
import type { StudentRejection, StudentRow } from './student-rows.ts';

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

/** Who holds an address anywhere in the service: its entry in `email_register` (loadStudentState, src/writes/student-store.ts). */
export interface EmailOwner {
  readonly kind: AccountKind;
  /** Whose account it is: the writing university's, another university's, or no university's (self-serve, some staff). */
  readonly university: 'yours' | 'another' | 'none';
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

/** A student's fields a row may change; its address is how it is found, never changed by a row. */
export type StudentField = Exclude<keyof StudentValues, 'email'>;

export const CHANGEABLE_STUDENT_FIELDS = Object.keys({
  firstName: true, lastName: true, externalId: true, phone: true, graduationDate: true, isAlumni: true, cohortId: true,
} satisfies Record<StudentField, true>) as readonly StudentField[];

export type StudentDecision =
  | { readonly kind: 'reject'; readonly row: StudentRow; readonly rejection: StudentRejection }
  | { readonly kind: 'unchanged'; readonly row: StudentRow; readonly id: string; readonly cohortId: string | null; readonly notes: string[] }
  | {
      readonly kind: 'create' | 'update';
      readonly row: StudentRow;
      readonly id: string;
      readonly values: StudentValues;
      readonly history: readonly AlumniChange[];
      readonly secondaryEmail: string | null;
      /** The cohort the student was in before this change (null for a create): its count changes too when it moves. */
      readonly previousCohortId: string | null;
      /** The fields whose value differs from the student's (every field of a create): what an update writes. */
      readonly changedFields: readonly StudentField[];
      readonly notes: string[];
    };

export interface StudentDecisionContext {
  readonly mode: WriteMode;
  readonly today: string;
  readonly newId: () => string;
}

const ERASED_ADDRESS = 'The address belongs to an erased account, which cannot be recreated through the API.';

function ownerRejection(owners: readonly EmailOwner[] | undefined): StudentRejection | null {
  if (!owners || owners.length === 0) return null;
  if (owners.some((o) => o.erased)) return reject('ACCOUNT_DELETED', ERASED_ADDRESS);
  // The contract's words: "an account of another university", a student's or a self-serve one;
  // the rest (self-serve accounts of this university or of none) is "not on the caller's roster".
  const code = owners.some((o) => o.kind === 'staff') ? 'EMAIL_BELONGS_TO_NON_STUDENT'
    : owners.some((o) => o.university === 'another') ? 'EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY' : 'EMAIL_BELONGS_TO_EXISTING_ACCOUNT';
  return reject(code, STUDENT_ROW_CODES[code]);
}

function resolveCohort(name: string, state: StudentBatchState): CohortRef | StudentRejection {
  const matches = state.cohortsByName.get(name) ?? [];
  if (matches.length === 0) return reject('COHORT_NOT_FOUND', `No cohort named "${name}" at your university; create it first with POST /v1/cohorts.`);
  if (matches.length > 1) return reject('COHORT_NAME_AMBIGUOUS', `${matches.length} cohorts share the name "${name}".`);
  return matches[0];
}

const isRejection = (x: CohortRef | StudentRejection): x is StudentRejection => 'code' in x;

function alumniNote(isAlumni: boolean, graduationDate: string | null, cohortEndDate: string | null, implied: boolean): string {
  const basis = graduationDate !== null
    ? `the graduation_date ${graduationDate} implies ${implied}`
    : cohortEndDate !== null ? `with no graduation_date, the cohort end_date ${cohortEndDate} implies ${implied}` : `the dates imply ${implied}`;
  // A sign-in sets a false flag the dates say is true, and never clears a true one. A partner's
  // graduation_date is no derivation moment: said "a graduation-date change", the note read as
  // if sending one would correct the flag.
  const overwrittenBy = `a later move to another cohort or a graduation date set in the app${implied ? ', or the student\'s next sign-in,' : ''}`;
  return `is_alumni was applied as sent (${isAlumni}), but ${basis}; ${overwrittenBy} will re-derive the flag and overwrite it.`;
}

// Verification makes the address a login, never the contact address (src/domain/student-events.ts).
const secondaryNote = (email: string) =>
  `${email} was recorded as a secondary address of the student matched by external_id; it is not a login or the contact address, and becomes a login address once the student verifies it.`;

/** Which student, if any, the row addresses; or why it cannot be matched. */
function matchStudent(row: StudentRow, state: StudentBatchState): Match | StudentRejection {
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
  if (erased) return reject('ACCOUNT_DELETED', ERASED_ADDRESS);
  return { target: null, addSecondary: false };
}

type Match = { readonly target: StudentRecord | null; readonly addSecondary: boolean };
type Rejected = Extract<StudentDecision, { kind: 'reject' }>;

/** A row that matched no student: created unless PATCH, the address is taken, or the cohort is wrong. */
function decideCreate(row: StudentRow, state: StudentBatchState, context: StudentDecisionContext): StudentDecision {
  const rejected = (rejection: StudentRejection): Rejected => ({ kind: 'reject', row, rejection });
  if (context.mode === 'patch') return rejected(reject('NOT_FOUND', 'No student matches the external_id or email; PATCH never creates.'));
  const owned = ownerRejection(state.emailOwners.get(row.email));
  if (owned) return rejected(owned);
  // Validation guarantees the create fields on PUT and POST (STUDENT_SHAPE.put is `create`).
  const cohort = resolveCohort(row.cohortName!, state);
  if (isRejection(cohort)) return rejected(cohort);
  const graduationDate = row.graduationDate ?? null;
  const implied = impliedAlumni(graduationDate, cohort.endDate, context.today);
  const isAlumni = row.isAlumni!;
  return {
    kind: 'create', row, id: context.newId(), secondaryEmail: null, previousCohortId: null, changedFields: CHANGEABLE_STUDENT_FIELDS,
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

/** The flag after the row: an enrolment or a move derives it first, a sent value applies on top. */
function flagSteps(row: StudentRow, target: StudentRecord, cohort: CohortRef | null, graduationDate: string | null, today: string): AlumniChange[] {
  const steps: AlumniChange[] = [];
  if (cohort !== null && cohort.id !== target.cohortId) {
    steps.push({ isAlumni: impliedAlumni(graduationDate, cohort.endDate, today), reason: target.cohortId === null ? 'cohort_enrolment' : 'cohort_move' });
  }
  if (row.isAlumni !== undefined) steps.push({ isAlumni: row.isAlumni, reason: 'partner_api_push' });
  return steps;
}

/**
 * Whether a field of `values` differs from the student's, one comparison each: a field added to
 * StudentField does not compile until it has one. Read with a variable key (`values[field]`),
 * the comparisons of a 500-row replay took 70–110 µs.
 */
const FIELD_DIFFERS: Readonly<Record<StudentField, (values: StudentValues, target: StudentRecord) => boolean>> = {
  firstName: (values, target) => values.firstName !== target.firstName,
  lastName: (values, target) => values.lastName !== target.lastName,
  externalId: (values, target) => values.externalId !== target.externalId,
  phone: (values, target) => values.phone !== target.phone,
  graduationDate: (values, target) => values.graduationDate !== target.graduationDate,
  isAlumni: (values, target) => values.isAlumni !== target.isAlumni,
  cohortId: (values, target) => values.cohortId !== target.cohortId,
};
const FIELD_CHECKS = CHANGEABLE_STUDENT_FIELDS.map((field) => [field, FIELD_DIFFERS[field]] as const);

function changedFields(values: StudentValues, target: StudentRecord): StudentField[] {
  const changed: StudentField[] = [];
  for (const [field, differs] of FIELD_CHECKS) if (differs(values, target)) changed.push(field);
  return changed;
}

/**
 * An update's history with the partner's sent value last, also when it left the flag as it was:
 * the contract's table writes a `partner_api_push` entry for every partner write that creates or
 * updates and carries `is_alumni`. An unchanged row writes nothing, its entry included.
 */
function withPartnerPush(history: readonly AlumniChange[], row: StudentRow): readonly AlumniChange[] {
  if (row.isAlumni === undefined || history.at(-1)?.reason === 'partner_api_push') return history;
  return [...history, { isAlumni: row.isAlumni, reason: 'partner_api_push' }];
}

/** A row that matched a student: updated unless POST, the cohort is wrong, or nothing changes. */
function decideUpdate(row: StudentRow, target: StudentRecord, addSecondary: boolean, state: StudentBatchState, context: StudentDecisionContext): StudentDecision {
  if (context.mode === 'post') return { kind: 'reject', row, rejection: reject('ALREADY_EXISTS', 'The student exists already; POST creates only, and nothing was written.') };
  const cohort = row.cohortName === undefined ? null : resolveCohort(row.cohortName, state);
  if (cohort !== null && isRejection(cohort)) return { kind: 'reject', row, rejection: cohort };
  const moved = cohort !== null && cohort.id !== target.cohortId;
  const cohortEndDate = moved ? cohort.endDate : target.cohortEndDate;
  const graduationDate = row.graduationDate !== undefined ? row.graduationDate : target.graduationDate;
  const steps = flagSteps(row, target, cohort, graduationDate, context.today);
  const history = alumniChanges(target.isAlumni, steps);

  const notes: string[] = [];
  const implied = impliedAlumni(graduationDate, cohortEndDate, context.today);
  if (row.isAlumni !== undefined && row.isAlumni !== implied) notes.push(alumniNote(row.isAlumni, graduationDate, cohortEndDate, implied));
  if (addSecondary) notes.push(secondaryNote(row.email));

  const values: StudentValues = {
    email: target.email,
    firstName: row.firstName ?? target.firstName,
    lastName: row.lastName ?? target.lastName,
    externalId: row.externalId !== undefined ? row.externalId : target.externalId,
    phone: row.phone !== undefined ? row.phone : target.phone,
    graduationDate,
    isAlumni: steps.length > 0 ? steps[steps.length - 1].isAlumni : target.isAlumni,
    // Validation refuses a null cohort_name, so a student without a cohort gets one here.
    cohortId: moved ? cohort.id : target.cohortId!,
  };
  const changed = changedFields(values, target);
  if (!addSecondary && history.length === 0 && changed.length === 0) return { kind: 'unchanged', row, id: target.id, cohortId: target.cohortId, notes };
  return {
    kind: 'update', row, id: target.id, values, history: withPartnerPush(history, row), secondaryEmail: addSecondary ? row.email : null, previousCohortId: target.cohortId,
    changedFields: changed, notes,
  };
}

/**
 * Decides every row in request order. Validation already refused rows repeating an email or
 * external_id (validateStudentBatch); a later row that reaches a student an earlier row reached,
 * through another address, is DUPLICATE_IN_BATCH here, also when the earlier row was refused
 * (a cohort not found, say).
 */
export function decideStudentBatch(rows: readonly StudentRow[], state: StudentBatchState, context: StudentDecisionContext): StudentDecision[] {
  const seenStudents = new Set<string>();
  return rows.map((row) => {
    const match = matchStudent(row, state);
    if ('code' in match) return { kind: 'reject', row, rejection: match };
    const { target } = match;
    if (target === null) return decideCreate(row, state, context);
    if (seenStudents.has(target.id)) {
      return { kind: 'reject', row, rejection: reject('DUPLICATE_IN_BATCH', 'An earlier row of this batch addresses the same student; nothing was written for this row.') };
    }
    seenStudents.add(target.id);
    return decideUpdate(row, target, match.addSecondary, state, context);
  });
}

export interface StudentResult {
  email: string | null;
  status: RowStatus;
  id?: string;
  cohort_id?: string | null;
  code?: StudentRowCode;
  message?: string;
  notes?: string[];
}

export function studentResult(decision: StudentDecision): StudentResult {
  const email = echoedKey(decision.row.sentEmail);
  switch (decision.kind) {
    case 'reject':
      return { email, status: 'rejected', code: decision.rejection.code, message: decision.rejection.message };
    case 'unchanged':
      return { email, status: 'unchanged', id: decision.id, cohort_id: decision.cohortId, ...(decision.notes.length ? { notes: decision.notes } : {}) };
    default:
      return {
        email, status: STATUS_OF_DECISION[decision.kind], id: decision.id, cohort_id: decision.values.cohortId,
        ...(decision.notes.length ? { notes: decision.notes } : {}),
      };
  }
}
