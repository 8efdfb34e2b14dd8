/**
 * App-side events on a student account (docs/decisions.md, "Operator API"): sign-in, a graduation date set in the
 * app, verification of a secondary address, erasure, and the alumni-flag history. The
 * derivation moments among them use the same pure rules as partner writes.
 */
import type { Database } from '../db/database.ts';
import { lockUniversity } from '../db/locks.ts';
import type { Queryable } from '../db/store.ts';
import { type UnnestColumn, unnest } from '../db/unnest.ts';
import { apiError } from '../errors.ts';
import { type AlumniChange, alumniAfterSignIn, alumniChanges, impliedAlumni, todayUtc } from './alumni.ts';
import { timestampJson } from './timestamps.ts';

export interface HistoryEntry extends AlumniChange {
  readonly universityId: string;
  readonly studentId: string;
}

const HISTORY_COLUMNS: readonly UnnestColumn<HistoryEntry>[] = [
  { name: 'university_id', type: 'uuid', value: (e) => e.universityId },
  { name: 'student_id', type: 'uuid', value: (e) => e.studentId },
  { name: 'is_alumni', type: 'boolean', value: (e) => e.isAlumni },
  { name: 'reason', type: 'text', value: (e) => e.reason },
];

export async function recordAlumniHistory(tx: Queryable, entries: readonly HistoryEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const { rows, params } = unnest(HISTORY_COLUMNS, entries);
  await tx.query(
    `insert into alumni_flag_history (university_id, student_id, is_alumni, reason)
     select u.university_id, u.student_id, u.is_alumni, u.reason from ${rows}`,
    params,
  );
}

interface StudentFlagState {
  id: string;
  university_id: string;
  is_alumni: boolean;
  graduation_date: string | null;
  cohort_end_date: string | null;
}

const studentNotFound = () => apiError('NOT_FOUND', 'No student has that id.');

/** Locks the student's university, then reads what the derivation needs. */
async function lockedStudent(tx: Queryable, studentId: string): Promise<StudentFlagState> {
  const [owner] = await tx.query<{ university_id: string }>('select university_id from students where id = $1', [studentId]);
  if (!owner) throw studentNotFound();
  await lockUniversity(tx, owner.university_id);
  const [state] = await tx.query<StudentFlagState>(
    `select s.id, s.university_id, s.is_alumni, s.graduation_date::text, c.end_date::text as cohort_end_date
     from students s left join cohorts c on c.id = s.cohort_id where s.id = $1`,
    [studentId],
  );
  if (!state) throw studentNotFound();
  return state;
}

async function applyFlag(tx: Queryable, state: StudentFlagState, change: AlumniChange, extraSet = '', extraParams: (string | null)[] = []) {
  const changes = alumniChanges(state.is_alumni, [change]);
  await tx.query(
    `update students set is_alumni = $2, updated_at = now()${extraSet} where id = $1`,
    [state.id, String(change.isAlumni), ...extraParams],
  );
  await recordAlumniHistory(tx, changes.map((c) => ({ ...c, universityId: state.university_id, studentId: state.id })));
}

/** First sign-in claims the invited account; the derivation may set the flag, never clear it. */
export function signIn(db: Database, studentId: string): Promise<void> {
  return db.asOperator(async (tx) => {
    const state = await lockedStudent(tx, studentId);
    const implied = impliedAlumni(state.graduation_date, state.cohort_end_date, todayUtc());
    await applyFlag(tx, state, { isAlumni: alumniAfterSignIn(state.is_alumni, implied), reason: 'sign_in' },
      `, account_status = 'claimed'`);
  });
}

/** A graduation date set in the app is a derivation moment: the flag is recomputed. */
export function setGraduationDateInApp(db: Database, studentId: string, graduationDate: string | null): Promise<void> {
  return db.asOperator(async (tx) => {
    const state = await lockedStudent(tx, studentId);
    const implied = impliedAlumni(graduationDate, state.cohort_end_date, todayUtc());
    await applyFlag(tx, state, { isAlumni: implied, reason: 'graduation_date_set' }, ', graduation_date = $3::date', [graduationDate]);
  });
}

/** A recorded secondary address becomes a login address once the student verifies it. */
export function verifyEmail(db: Database, studentId: string, email: string): Promise<{ email: string; verified_at: string }> {
  return db.asOperator(async (tx) => {
    await lockedStudent(tx, studentId);
    const [row] = await tx.query<{ email: string; verified_at: string }>(
      `update secondary_emails set verified_at = coalesce(verified_at, now())
       where student_id = $1 and email = $2 returning email, ${timestampJson('verified_at')} as verified_at`,
      [studentId, email.trim().toLowerCase()],
    );
    if (!row) throw apiError('NOT_FOUND', 'That address is not a recorded secondary address of the student.');
    return row;
  });
}

/**
 * Erasure deletes the student and everything hanging off it, and leaves a tombstone holding
 * only hashes of the address and the student number, so the person is never recreated.
 */
export function eraseStudent(db: Database, studentId: string): Promise<void> {
  return db.asOperator(async (tx) => {
    await lockedStudent(tx, studentId);
    await tx.query(
      `with history as (delete from alumni_flag_history where student_id = $1),
       erased as (delete from students where id = $1 returning id, email, external_id)
       update accounts a set email = null, erased_at = now(),
         erased_email_hash = encode(sha256(convert_to(e.email, 'UTF8')), 'hex'),
         erased_external_id_hash = case when e.external_id is null then null
                                        else encode(sha256(convert_to(e.external_id, 'UTF8')), 'hex') end
       from erased e where a.id = e.id`,
      [studentId],
    );
  });
}

export function alumniHistory(db: Database, studentId: string) {
  return db.asOperator(async (tx) => {
    const [student] = await tx.query<{ id: string; is_alumni: boolean; account_status: string }>(
      'select id, is_alumni, account_status from students where id = $1', [studentId]);
    if (!student) throw studentNotFound();
    const history = await tx.query<{ is_alumni: boolean; reason: string; created_at: string }>(
      `select is_alumni, reason, ${timestampJson('created_at')} as created_at
       from alumni_flag_history where student_id = $1 order by id`,
      [studentId],
    );
    return { student_id: student.id, is_alumni: student.is_alumni, account_status: student.account_status, history };
  });
}
