/**
 * App-side events on a student account (docs/decisions.md, "Operator API"): sign-in, a graduation date set in the
 * app, verification of a secondary address, erasure, and the alumni-flag history. The
 * derivation moments among them use the same pure rules as partner writes.
 */
import { arrayLiteral } from '../db/array-literal.ts';
import type { Database } from '../db/database.ts';
import { type ChangeSeq, lockUniversity } from '../db/locks.ts';
import type { Queryable } from '../db/store.ts';
import { type ValuesColumn, valuesList } from '../db/values.ts';
import { apiError } from '../errors.ts';
import type { AccountStatus } from '../resources/registry.ts';
import { recordTombstone, stampCohortCounts } from './change-stamps.ts';
import { emailKey, markErasedAddresses, sha256Hex } from './email-register.ts';
import { type AlumniChange, alumniAfterSignIn, alumniChanges, impliedAlumni, todayUtc } from './alumni.ts';
import { timestampJson } from './timestamps.ts';

/** An entry of a student's alumni-flag history. */
export interface HistoryEntry extends AlumniChange {
  readonly studentId: string;
}

const HISTORY_COLUMNS: readonly ValuesColumn<HistoryEntry>[] = [
  { name: 'student_id', type: 'uuid', value: (e) => e.studentId },
  { name: 'is_alumni', type: 'boolean', value: (e) => e.isAlumni },
  { name: 'reason', type: 'text', value: (e) => e.reason },
];

/** The statement that records the entries of students of one university, with its parameters; null when there are none. */
export function alumniHistoryStatement(universityId: string, entries: readonly HistoryEntry[]): [string, (string | null)[]] | null {
  if (entries.length === 0) return null;
  const list = valuesList(HISTORY_COLUMNS, entries, 2, ['$1::uuid']);
  return [`insert into alumni_flag_history (university_id, ${list.columns}) values ${list.rows}`, [universityId, ...list.params]];
}

async function recordAlumniHistory(tx: Queryable, universityId: string, entries: readonly HistoryEntry[]): Promise<void> {
  const statement = alumniHistoryStatement(universityId, entries);
  if (statement) await tx.query(...statement);
}

interface StudentFlagState {
  id: string;
  university_id: string;
  cohort_id: string | null;
  is_alumni: boolean;
  account_status: AccountStatus;
  graduation_date: string | null;
  cohort_end_date: string | null;
}

/** A student as an event finds it, with the change number of the event's transaction (src/db/locks.ts). */
interface LockedStudent extends StudentFlagState {
  changeSeq: ChangeSeq;
}

const studentNotFound = () => apiError('NOT_FOUND', 'No student has that id.');

/** Locks the student's university, then reads what the derivation needs. */
async function lockedStudent(tx: Queryable, studentId: string): Promise<LockedStudent> {
  const [owner] = await tx.query<{ university_id: string }>('select university_id from students where id = $1', [studentId]);
  if (!owner) throw studentNotFound();
  const changeSeq = await lockUniversity(tx, owner.university_id);
  const [state] = await tx.query<StudentFlagState>(
    `select s.id, s.university_id, s.cohort_id, s.is_alumni, s.account_status, s.graduation_date::text, c.end_date::text as cohort_end_date
     from students s left join cohorts c on c.university_id = s.university_id and c.id = s.cohort_id where s.id = $1 and s.university_id = $2`,
    [studentId, owner.university_id],
  );
  if (!state) throw studentNotFound();
  return { ...state, changeSeq };
}

/**
 * Writes an event's flag and the fields it sets (`extraSet`, numbering its parameters from $5),
 * unless neither changes (`fieldsChange` false): an event that changed nothing, a second sign-in
 * or the date already stored, moved `updated_at` and was an `updated` entry of the change feed.
 */
async function applyFlag(tx: Queryable, state: LockedStudent, change: AlumniChange, fieldsChange: boolean, extraSet = '', extraParams: (string | null)[] = []) {
  if (!fieldsChange && change.isAlumni === state.is_alumni) return;
  const changes = alumniChanges(state.is_alumni, [change]);
  await tx.query(
    `update students set is_alumni = $3, updated_at = now(), change_seq = $4::bigint${extraSet} where id = $1 and university_id = $2`,
    [state.id, state.university_id, String(change.isAlumni), state.changeSeq, ...extraParams],
  );
  await recordAlumniHistory(tx, state.university_id, changes.map((c) => ({ ...c, studentId: state.id })));
}

/** First sign-in claims the invited account; the derivation may set the flag, never clear it. */
export function signIn(db: Database, studentId: string): Promise<void> {
  return db.asOperator(async (tx) => {
    const state = await lockedStudent(tx, studentId);
    const implied = impliedAlumni(state.graduation_date, state.cohort_end_date, todayUtc());
    await applyFlag(tx, state, { isAlumni: alumniAfterSignIn(state.is_alumni, implied), reason: 'sign_in' },
      state.account_status !== 'claimed', `, account_status = 'claimed'`);
  });
}

/** A graduation date set in the app is a derivation moment: the flag is recomputed. */
export function setGraduationDateInApp(db: Database, studentId: string, graduationDate: string | null): Promise<void> {
  return db.asOperator(async (tx) => {
    const state = await lockedStudent(tx, studentId);
    const implied = impliedAlumni(graduationDate, state.cohort_end_date, todayUtc());
    await applyFlag(tx, state, { isAlumni: implied, reason: 'graduation_date_set' }, graduationDate !== state.graduation_date,
      ', graduation_date = $5::date', [graduationDate]);
  });
}

/** A recorded secondary address becomes a login address once the student verifies it. */
export function verifyEmail(db: Database, studentId: string, email: string): Promise<{ email: string; verified_at: string }> {
  return db.asOperator(async (tx) => {
    const student = await lockedStudent(tx, studentId);
    // Two statements: Citus refuses now() beside a column (coalesce) in an UPDATE, and a
    // function of a column in RETURNING.
    const address = [studentId, emailKey(email), student.university_id];
    await tx.query(
      `update secondary_emails set verified_at = now()
       where student_id = $1 and email = $2 and university_id = $3 and verified_at is null`, address);
    const [row] = await tx.query<{ email: string; verified_at: string }>(
      `select email, ${timestampJson('verified_at')} as verified_at from secondary_emails
       where student_id = $1 and email = $2 and university_id = $3`, address);
    if (!row) throw apiError('NOT_FOUND', 'That address is not a recorded secondary address of the student.');
    return row;
  });
}

/**
 * Deletes the university's kept answers to writes (src/domain/idempotency-keys.ts) with a row
 * naming the student, by id or by an address as sent (read as the rows' keys are, emailKey): left,
 * a retry's replay served the erased address for up to a day. A retry under such a key runs
 * again. Erasure is rare; a day of one university's answers is read to match them here.
 */
async function forgetAnswersNaming(tx: Queryable, universityId: string, studentId: string, addresses: readonly string[]): Promise<void> {
  const erased = new Set(addresses);
  const kept = await tx.query<{ token_id: string; key: string; response_body: string }>(
    'select token_id, key, response_body from idempotency_keys where university_id = $1 and response_body is not null', [universityId]);
  const naming = kept.filter(({ response_body: body }) => ((JSON.parse(body) as { results?: { id?: string; email?: unknown }[] }).results ?? [])
    .some((result) => result.id === studentId || (typeof result.email === 'string' && erased.has(emailKey(result.email)))));
  if (naming.length === 0) return;
  await tx.query(
    `delete from idempotency_keys where university_id = $1
       and (token_id, key) in (select * from unnest($2::uuid[], $3::text[]))`,
    [universityId, arrayLiteral(naming.map((answer) => answer.token_id)), arrayLiteral(naming.map((answer) => answer.key))]);
}

/**
 * Erasure deletes the student and everything hanging off it, and leaves a tombstone holding
 * only hashes of the address and the student number, so the person is never recreated; the
 * change feed gets a tombstone of its own holding only the id, and the student's cohort shows
 * its new count there.
 */
export function eraseStudent(db: Database, studentId: string): Promise<void> {
  return db.asOperator(async (tx) => {
    const { university_id: universityId, cohort_id: cohortId, changeSeq } = await lockedStudent(tx, studentId);
    const key = [studentId, universityId];
    const [student] = await tx.query<{ email: string; external_id: string | null }>(
      'select email, external_id from students where id = $1 and university_id = $2', key);
    const secondaries = await tx.query<{ email: string }>(
      'select email from secondary_emails where student_id = $1 and university_id = $2', key);
    // The hashes are computed here: Citus refuses sha256() of a column in an UPDATE.
    await tx.query('delete from alumni_flag_history where student_id = $1 and university_id = $2', key);
    await tx.query('delete from students where id = $1 and university_id = $2', key);
    await tx.query(
      `update accounts set email = null, erased_at = now(), erased_email_hash = $3, erased_external_id_hash = $4
       where id = $1 and university_id = $2`,
      [...key, sha256Hex(student.email), student.external_id === null ? null : sha256Hex(student.external_id)]);
    const addresses = [student.email, ...secondaries.map((s) => s.email)];
    await markErasedAddresses(tx, addresses);
    await forgetAnswersNaming(tx, universityId, studentId, addresses);
    await recordTombstone(tx, universityId, changeSeq, 'students', studentId);
    await stampCohortCounts(tx, universityId, changeSeq, [cohortId]);
  });
}

export function alumniHistory(db: Database, studentId: string) {
  return db.asOperator(async (tx) => {
    const [student] = await tx.query<{ id: string; university_id: string; is_alumni: boolean; account_status: string }>(
      'select id, university_id, is_alumni, account_status from students where id = $1', [studentId]);
    if (!student) throw studentNotFound();
    // By the tenant-led index (src/db/migrations/012_tenant_led_indexes.sql).
    const history = await tx.query<{ is_alumni: boolean; reason: string; created_at: string }>(
      `select is_alumni, reason, ${timestampJson('created_at')} as created_at
       from alumni_flag_history where university_id = $2 and student_id = $1 order by id`,
      [studentId, student.university_id],
    );
    return { student_id: student.id, is_alumni: student.is_alumni, account_status: student.account_status, history };
  });
}
