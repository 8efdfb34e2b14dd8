/**
 * The database side of a student batch: the current state of every row at once (set-based
 * queries in two pipelines), and the decisions applied with set-based statements (the address
 * claims, then every write in one pipeline).
 */
import { arrayLiteral } from '../db/array-literal.ts';
import type { Queryable } from '../db/store.ts';
import { type ValuesColumn, valuesList } from '../db/values.ts';
import { claimAddresses as claimInRegister, sha256Hex } from '../domain/email-register.ts';
import type { ChangeSeq } from '../db/locks.ts';
import { cohortCountStamp } from '../domain/change-stamps.ts';
import { alumniHistoryStatement } from '../domain/student-events.ts';
import { type StudentKeys, type StudentRow, studentKeys } from './student-rows.ts';
import { type CohortRef, type EmailOwner, CHANGEABLE_STUDENT_FIELDS, type StudentBatchState, type StudentDecision, type StudentField, type StudentRecord } from './student-rules.ts';

/** A student as the state read answers it: the record itself, and the batch's address it was found by when that is a secondary one. */
interface FoundStudent extends StudentRecord {
  readonly secondaryEmail: string | null;
}

/** The column of each field a row may change. */
const FIELD_COLUMNS: Readonly<Record<StudentField, Omit<ValuesColumn<Change>, 'value'>>> = {
  firstName: { name: 'first_name', type: 'text' },
  lastName: { name: 'last_name', type: 'text' },
  externalId: { name: 'external_id', type: 'text' },
  phone: { name: 'phone', type: 'text' },
  graduationDate: { name: 'graduation_date', type: 'date' },
  isAlumni: { name: 'is_alumni', type: 'boolean' },
  cohortId: { name: 'cohort_id', type: 'uuid' },
};

/**
 * A student's columns named as StudentRecord names them, so that a row read is the record the
 * rules take: indexing a 500-row replay's students took 150–220 µs copying each row into a record
 * and 80 with none. Dates come as their `YYYY-MM-DD` text.
 */
const STUDENT_COLUMNS = ['s.id', 's.email',
  ...CHANGEABLE_STUDENT_FIELDS.map((field) => {
    const { name, type } = FIELD_COLUMNS[field];
    return `s.${name}${type === 'date' ? '::text' : ''} as "${field}"`;
  }),
  'c.end_date::text as "cohortEndDate"'].join(', ');

/** Joined on the tenant key: with students named by university (`$1`), the statement runs on that university's shard alone. */
const STUDENT_COHORT = 'left join cohorts c on c.university_id = s.university_id and c.id = s.cohort_id';

/**
 * A batch's students: `$1` the university, `$2` the batch's addresses, `$3` its numbers (text
 * arrays). The write benchmark's floor (bench/floors/student-writes.ts) reads the same.
 */
export const STUDENT_STATE_READ = `select ${STUDENT_COLUMNS}, null::text as "secondaryEmail" from students s ${STUDENT_COHORT}
     where s.university_id = $1 and (s.email = any($2::text[]) or s.external_id = any($3::text[]))
   union all
   select ${STUDENT_COLUMNS}, se.email from secondary_emails se
     join students s on s.university_id = se.university_id and s.id = se.student_id ${STUDENT_COHORT}
     where se.university_id = $1 and se.email = any($2::text[])`;

/**
 * The students found, by every address and number they were found by. A student found by two of
 * the batch's addresses comes as two rows alike: either stands for it (the rules compare ids).
 */
function indexStudents(students: readonly FoundStudent[]): Pick<StudentBatchState, 'byEmail' | 'byExternalId'> {
  const byEmail = new Map<string, StudentRecord>();
  const byExternalId = new Map<string, StudentRecord>();
  for (const s of students) {
    byEmail.set(s.secondaryEmail ?? s.email, s);
    if (s.externalId) byExternalId.set(s.externalId, s);
  }
  return { byEmail, byExternalId };
}

interface CohortRow {
  id: string;
  name: string;
  end_date: string;
}

/** The students and cohorts a batch's keys name (readNamedState): its state before the other holders of its unmatched keys are asked. */
export interface NamedState {
  readonly students: readonly FoundStudent[];
  readonly cohorts: readonly CohortRow[];
}

/** The students `keys` name, by address and by number, and the cohorts they name, in one pipeline. */
export async function readNamedState(tx: Queryable, universityId: string, keys: StudentKeys): Promise<NamedState> {
  // Every row with a key has an address: a batch without one (none valid, say) names nothing.
  if (keys.emails.length === 0) return { students: [], cohorts: [] };
  // The students a batch names, by each way of matching, and the cohorts it names, in one
  // pipeline. Each branch is an index scan of the university's unique keys for the whole array
  // (`= any`), a plan that needs no statistics; a student named by address and by number comes
  // once, from the first (a replay reads 500 rows, not 1,000). A join of unnest(…) to the table
  // was planned, on PGlite's never-analysed tables, as a loop over every student of the
  // university per branch (measured: 200-330 ms for 500 rows).
  // A large university's analysed statistics plan the same lookups because the batch runs as
  // pds_tenant (src/db/migrations/009_one_university_role.sql has why). Keys hidden from the
  // planner (behind a subquery) or one LATERAL lookup per key, tried first, filtered every
  // student against an unhashed array or probed the wrong index on never-analysed tables: 20–300 ms.
  const [students, cohorts] = await Promise.all([tx.query<FoundStudent>(
    STUDENT_STATE_READ,
    [universityId, arrayLiteral(keys.emails), arrayLiteral(keys.externalIds)],
  ), tx.query<CohortRow>(
    'select id, name, end_date::text from cohorts where university_id = $1 and name = any($2::text[]) order by id',
    [universityId, arrayLiteral(keys.cohortNames)])]);
  return { students, cohorts };
}

/**
 * The state of `rows`: the students and cohorts they name (`named`, read already by keys that
 * include theirs; read by their own keys when not given), then who else holds their addresses
 * and numbers not found at the university.
 */
export async function loadStudentState(
  tx: Queryable, universityId: string, rows: readonly StudentRow[], named?: Promise<NamedState>,
): Promise<StudentBatchState> {
  const { students, cohorts } = await (named ?? readNamedState(tx, universityId, studentKeys(rows)));
  const { byEmail, byExternalId } = indexStudents(students);
  // The rows' own keys, looked up in that index: a valid row's address and number are its own in
  // the batch (DUPLICATE_IN_BATCH), and a repeat would only be asked about twice.
  const unmatchedEmails: string[] = [];
  const unmatchedExternalIds: string[] = [];
  for (const row of rows) {
    if (!byEmail.has(row.email)) unmatchedEmails.push(row.email);
    if (row.externalId && !byExternalId.has(row.externalId)) unmatchedExternalIds.push(row.externalId);
  }
  // Only addresses and numbers not found at the university can belong to anyone else (none, on
  // a replay); the two lookups travel in one pipeline. Each is hashed once, and its answer read
  // back through the hash.
  const emailsByHash = new Map(unmatchedEmails.map((e) => [sha256Hex(e), e]));
  const externalIdsByHash = new Map(unmatchedExternalIds.map((x) => [sha256Hex(x), x]));
  const [owners, erased] = await Promise.all([
    unmatchedEmails.length === 0 ? [] : tx.query<{ email_hash: string; kind: EmailOwner['kind']; university: EmailOwner['university']; erased: boolean }>(
      `select email_hash, kind, case when university_id is null then 'none' when university_id = $1 then 'yours' else 'another' end as university, erased
       from email_register where email_hash = any($2::text[])`, [universityId, arrayLiteral([...emailsByHash.keys()])]),
    unmatchedExternalIds.length === 0 ? [] : tx.query<{ hash: string }>(
      `select erased_external_id_hash as hash from accounts where university_id = $1 and erased_external_id_hash = any($2::text[])`,
      [universityId, arrayLiteral([...externalIdsByHash.keys()])]),
  ]);

  const emailOwners = new Map<string, EmailOwner[]>();
  for (const o of owners) emailOwners.set(emailsByHash.get(o.email_hash)!, [{ kind: o.kind, university: o.university, erased: o.erased }]);
  const cohortsByName = new Map<string, CohortRef[]>();
  for (const c of cohorts) cohortsByName.set(c.name, [...(cohortsByName.get(c.name) ?? []), { id: c.id, endDate: c.end_date }]);
  return {
    byEmail, byExternalId, emailOwners, cohortsByName,
    erasedExternalIds: new Set(erased.map((e) => externalIdsByHash.get(e.hash)!)),
  };
}

type Change = Extract<StudentDecision, { kind: 'create' | 'update' }>;

/**
 * Takes the service-wide addresses the changes need in the register (src/domain/email-register.ts):
 * a new student's account address, an added secondary address. Returns the rows that lost one to
 * another university between our read and our write; nothing is written for those rows and the
 * caller decides them again.
 */
async function claimAddresses(tx: Queryable, universityId: string, changes: readonly Change[]): Promise<Set<number>> {
  const creates = changes.filter((c) => c.kind === 'create');
  const secondaries = changes.filter((c) => c.secondaryEmail !== null);
  const won = await claimInRegister(tx, universityId, [...creates.map((c) => c.values.email), ...secondaries.map((c) => c.secondaryEmail!)]);
  const lost = new Set<number>();
  for (const c of creates) if (!won.has(c.values.email)) lost.add(c.row.index);
  for (const c of secondaries) if (!won.has(c.secondaryEmail!)) lost.add(c.row.index);
  return lost;
}

const fieldColumn = (field: StudentField): ValuesColumn<Change> => ({ ...FIELD_COLUMNS[field], value: (c) => c.values[field] });
const ID_COLUMN: ValuesColumn<Change> = { name: 'id', type: 'uuid', value: (c) => c.id };
const EMAIL_COLUMN: ValuesColumn<Change> = { name: 'email', type: 'text', value: (c) => c.values.email };
const STUDENT_INSERT_COLUMNS = [ID_COLUMN, EMAIL_COLUMN, ...CHANGEABLE_STUDENT_FIELDS.map(fieldColumn)];

/**
 * The update of `updates`: the columns any of them changes, and the change stamps. A batch of
 * cohort moves sends 3 parameters per row instead of 9; its 500-row update took 45–52 ms on
 * PGlite against 53–60 ms writing every column (the same rows, taking turns).
 */
function updateStatement(universityId: string, changeSeq: ChangeSeq, updates: readonly Change[]): [string, (string | null)[]] {
  const columns = CHANGEABLE_STUDENT_FIELDS.filter((field) => updates.some((u) => u.changedFields.includes(field))).map(fieldColumn);
  const list = valuesList([ID_COLUMN, ...columns], updates, 3);
  const assignments = [...columns.map(({ name }) => `${name} = u.${name}`), 'updated_at = now()', 'change_seq = $2::bigint'].join(', ');
  return [`update students s set ${assignments} from (values ${list.rows}) as u(${list.columns}) where s.id = u.id and s.university_id = $1`,
    [universityId, changeSeq, ...list.params]];
}

/**
 * The statements that write the changes, in the order the foreign keys need: accounts, students,
 * their addresses and history; each changed student, and each cohort whose student count moved,
 * stamped with the transaction's change number (src/db/locks.ts).
 */
function writeStatements(universityId: string, changeSeq: ChangeSeq, changes: readonly Change[]): [string, (string | null)[]][] {
  const statements: [string, (string | null)[]][] = [];
  const inserts = changes.filter((c) => c.kind === 'create');
  if (inserts.length > 0) {
    const accounts = valuesList([ID_COLUMN, EMAIL_COLUMN], inserts, 2, ['$1::uuid', `'student'`]);
    statements.push([`insert into accounts (university_id, kind, ${accounts.columns}) values ${accounts.rows}`, [universityId, ...accounts.params]]);
    const students = valuesList(STUDENT_INSERT_COLUMNS, inserts, 3, ['$1::uuid', '$2::bigint', '$2::bigint']);
    statements.push([`insert into students (university_id, change_seq, created_seq, ${students.columns}) values ${students.rows}`,
      [universityId, changeSeq, ...students.params]]);
  }
  const updates = changes.filter((c) => c.kind === 'update');
  if (updates.length > 0) statements.push(updateStatement(universityId, changeSeq, updates));
  const addresses = changes.filter((c) => c.secondaryEmail !== null);
  if (addresses.length > 0) {
    const list = valuesList<Change>([{ name: 'email', type: 'text', value: (c) => c.secondaryEmail }, { name: 'student_id', type: 'uuid', value: (c) => c.id }],
      addresses, 2, ['$1::uuid']);
    statements.push([`insert into secondary_emails (university_id, ${list.columns}) values ${list.rows}`, [universityId, ...list.params]]);
  }
  // The change feed: the cohorts a student joined or left show a new student_count.
  const moves = changes.filter((c) => c.values.cohortId !== c.previousCohortId);
  const stamp = cohortCountStamp(universityId, changeSeq, moves.flatMap((c) => [c.values.cohortId, c.previousCohortId]));
  if (stamp) statements.push(stamp);
  const history = alumniHistoryStatement(universityId, changes.flatMap((c) => c.history.map((h) => ({ ...h, studentId: c.id }))));
  if (history) statements.push(history);
  return statements;
}

/**
 * Applies the changes; returns the rows that lost a race on an address (see claimAddresses),
 * for which nothing was written. The writes depend on the claims' outcome only, not on one
 * another's: they travel in one pipeline (statements on one connection run in the order sent).
 */
export async function applyStudentChanges(tx: Queryable, universityId: string, changeSeq: ChangeSeq, changes: readonly Change[]): Promise<Set<number>> {
  const lost = await claimAddresses(tx, universityId, changes);
  const statements = writeStatements(universityId, changeSeq, changes.filter((c) => !lost.has(c.row.index)));
  await Promise.all(statements.map(([text, params]) => tx.query(text, params)));
  return lost;
}
