/**
 * The hand-written floors of the write benchmark (README, Measured): what a capable engineer would write
 * by hand for the service's three student batches, served by node:http and loaded by the same
 * HTTP client as the service. Each runs on the same driver (the store's own postgres.js sessions
 * or PGlite), in one transaction under the same role and scope, with the same set-based
 * statements, and does the same database work:
 * - PUT of new students: lock the university (drawing the change feed's number), read the batch's state (students by address,
 *   number and secondary address; the address register; erased numbers; the cohort), claim the
 *   addresses, insert the accounts, the students and their alumni history, and stamp the cohort they
 *   joined for the change feed;
 * - its replay: the same state read alone, every row found, rolled back as the service rolls back
 *   a batch that wrote nothing (src/writes/batches.ts);
 * - PATCH with cohort moves: lock, state read, move the students, stamp the cohorts they left and
 *   joined for the change feed, insert their alumni history.
 * What the floors leave out is the service's own work: token lookup, row validation, row codes,
 * the decisions of each row, the answer of each row.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { arrayLiteral } from '../../src/db/array-literal.ts';
import { Database } from '../../src/db/database.ts';
import { BATCH_PLANNING, UNIVERSITY_LOCK } from '../../src/db/locks.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type Queryable, type Store } from '../../src/db/store.ts';
import { valuesList } from '../../src/db/values.ts';
import { cohortCountStamp } from '../../src/domain/change-stamps.ts';
import { sha256Hex } from '../../src/domain/email-register.ts';
import { STUDENT_STATE_READ } from '../../src/writes/student-store.ts';

/** A row of the benchmark's batches: every PUT row carries all of these, a PATCH row the email and cohort. */
export interface BenchStudent {
  email: string;
  first_name?: string;
  last_name?: string;
  cohort_name: string;
  is_alumni?: boolean;
  external_id?: string;
  phone?: string;
}

/** What of the state read (STUDENT_STATE_READ) the floors use, under its names. */
interface FoundStudent {
  id: string;
  email: string;
  cohortId: string | null;
  isAlumni: boolean;
  graduationDate: string | null;
}


const today = () => new Date().toISOString().slice(0, 10);


async function lockAndRead(tx: Queryable, universityId: string, rows: readonly BenchStudent[]) {
  const emails = arrayLiteral(rows.map((r) => r.email));
  const [, [{ change_seq: changeSeq }], students, cohorts] = await Promise.all([
    // Planned as the service plans a batch.
    tx.query(BATCH_PLANNING),
    // The lock draws the change feed's number (src/db/locks.ts), which every written row carries.
    tx.query<{ change_seq: string }>(UNIVERSITY_LOCK, [universityId]),
    // The state the service reads (src/writes/student-store.ts): every field a row may change, to tell an unchanged row.
    tx.query<FoundStudent>(STUDENT_STATE_READ,
      [universityId, emails, arrayLiteral(rows.flatMap((r) => (r.external_id ? [r.external_id] : [])))]),
    tx.query<{ id: string; name: string; end_date: string }>(
      'select id, name, end_date::text from cohorts where university_id = $1 and name = any($2::text[])',
      [universityId, arrayLiteral([...new Set(rows.map((r) => r.cohort_name))])]),
  ]);
  return { changeSeq, students, cohortByName: new Map(cohorts.map((c) => [c.name, c])) };
}

async function putNewStudents(tx: Queryable, universityId: string, rows: readonly BenchStudent[]): Promise<number> {
  const { changeSeq, students, cohortByName } = await lockAndRead(tx, universityId, rows);
  const found = new Set(students.map((s) => s.email));
  const fresh = rows.filter((r) => !found.has(r.email)).map((r) => ({ ...r, id: randomUUID(), hash: sha256Hex(r.email) }));
  if (fresh.length === 0) return 0;
  await Promise.all([
    tx.query('select email_hash from email_register where email_hash = any($1::text[])', [arrayLiteral(fresh.map((r) => r.hash))]),
    tx.query('select erased_external_id_hash from accounts where university_id = $1 and erased_external_id_hash = any($2::text[])',
      [universityId, arrayLiteral(fresh.map((r) => sha256Hex(r.external_id ?? '')))]),
  ]);
  type Fresh = (typeof fresh)[number];
  const claims = valuesList<Fresh>([{ name: 'email_hash', type: 'text', value: (r) => r.hash }], [...fresh].sort((a, b) => (a.hash < b.hash ? -1 : 1)), 2, ['$1::uuid', `'student'`]);
  // The claims come first: the accounts and students follow for the addresses won.
  const won = new Set((await tx.query<{ email_hash: string }>(
    `insert into email_register (university_id, kind, ${claims.columns}) values ${claims.rows} on conflict do nothing returning email_hash`,
    [universityId, ...claims.params])).map((r) => r.email_hash));
  const kept = fresh.filter((r) => won.has(r.hash));
  if (kept.length === 0) return 0;
  const accounts = valuesList<Fresh>([{ name: 'id', type: 'uuid', value: (r) => r.id }, { name: 'email', type: 'text', value: (r) => r.email }], kept, 2, ['$1::uuid', `'student'`]);
  const inserts = valuesList<Fresh>([
    { name: 'id', type: 'uuid', value: (r) => r.id },
    { name: 'email', type: 'text', value: (r) => r.email },
    { name: 'cohort_id', type: 'uuid', value: (r) => cohortByName.get(r.cohort_name)!.id },
    { name: 'first_name', type: 'text', value: (r) => r.first_name! },
    { name: 'last_name', type: 'text', value: (r) => r.last_name! },
    { name: 'external_id', type: 'text', value: (r) => r.external_id ?? null },
    { name: 'phone', type: 'text', value: (r) => r.phone ?? null },
    { name: 'is_alumni', type: 'boolean', value: (r) => r.is_alumni ?? false },
  ], kept, 3, ['$1::uuid', '$2::bigint', '$2::bigint']);
  const history = valuesList<Fresh>([
    { name: 'student_id', type: 'uuid', value: (r) => r.id },
    { name: 'is_alumni', type: 'boolean', value: (r) => r.is_alumni ?? false },
  ], kept, 2, ['$1::uuid', `'partner_api_push'`]);
  await Promise.all([
    tx.query(`insert into accounts (university_id, kind, ${accounts.columns}) values ${accounts.rows}`, [universityId, ...accounts.params]),
    tx.query(`insert into students (university_id, change_seq, created_seq, ${inserts.columns}) values ${inserts.rows}`, [universityId, changeSeq, ...inserts.params]),
    tx.query(`insert into alumni_flag_history (university_id, reason, ${history.columns}) values ${history.rows}`, [universityId, ...history.params]),
    // The cohort the students joined shows a new student count in the change feed.
    tx.query(...cohortCountStamp(universityId, changeSeq, kept.map((r) => cohortByName.get(r.cohort_name)!.id))!),
  ]);
  return kept.length;
}

async function moveStudents(tx: Queryable, universityId: string, rows: readonly BenchStudent[]): Promise<number> {
  const { changeSeq, students, cohortByName } = await lockAndRead(tx, universityId, rows);
  const cohortByEmail = new Map(rows.map((r) => [r.email, cohortByName.get(r.cohort_name)!]));
  const moves = students.map((s) => {
    const cohort = cohortByEmail.get(s.email)!;
    return { id: s.id, previousCohortId: s.cohortId, wasAlumni: s.isAlumni, cohortId: cohort.id,
      isAlumni: s.graduationDate === null ? cohort.end_date < today() : s.graduationDate < today() };
  });
  type Move = (typeof moves)[number];
  const updates = valuesList<Move>([
    { name: 'id', type: 'uuid', value: (m) => m.id },
    { name: 'cohort_id', type: 'uuid', value: (m) => m.cohortId },
    { name: 'is_alumni', type: 'boolean', value: (m) => m.isAlumni },
  ], moves, 3);
  const changed = moves.filter((m) => m.isAlumni !== m.wasAlumni);
  const history = valuesList<Move>([
    { name: 'student_id', type: 'uuid', value: (m) => m.id },
    { name: 'is_alumni', type: 'boolean', value: (m) => m.isAlumni },
  ], changed, 2, ['$1::uuid', `'cohort_move'`]);
  await Promise.all([
    tx.query(`update students s set cohort_id = u.cohort_id, is_alumni = u.is_alumni, updated_at = now(), change_seq = $2::bigint
      from (values ${updates.rows}) as u(${updates.columns}) where s.id = u.id and s.university_id = $1`, [universityId, changeSeq, ...updates.params]),
    // The cohorts the students left and joined show a new student count in the change feed.
    tx.query(...cohortCountStamp(universityId, changeSeq, moves.flatMap((m) => [m.cohortId, m.previousCohortId]))!),
    changed.length === 0 ? [] : tx.query(`insert into alumni_flag_history (university_id, reason, ${history.columns}) values ${history.rows}`, [universityId, ...history.params]),
  ]);
  return moves.length;
}

/** Thrown out of the replay's transaction, so that the store rolls it back, with the rows it found. */
class RolledBack {
  constructor(readonly count: number) {}
}

async function readState(tx: Queryable, universityId: string, rows: readonly BenchStudent[]): Promise<number> {
  const { students } = await lockAndRead(tx, universityId, rows);
  throw new RolledBack(students.length);
}

/** The floor of each benchmark request, by the path the client sends it to. */
const FLOORS: Readonly<Record<string, (tx: Queryable, universityId: string, rows: readonly BenchStudent[]) => Promise<number>>> = {
  '/put': putNewStudents,
  '/replay': readState,
  '/patch': moveStudents,
};

/** Serves the floors over node:http on a free port of 127.0.0.1, for the students of `universityId`. */
export async function startWriteFloors(store: Store, universityId: string): Promise<{ baseUrl: string; close(): Promise<void> }> {
  // The same settings the service sends for a partner transaction.
  const settings = new Database(store, DEFAULT_STATEMENT_TIMEOUT_MS).universitySettings(universityId);
  const server = http.createServer(async (request, response) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const { students } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { students: BenchStudent[] };
      const floor = FLOORS[request.url ?? '']!;
      const count = await store.transaction((tx) => floor(tx, universityId, students), { settings })
        .catch((error: unknown) => (error instanceof RolledBack ? error.count : Promise.reject(error)));
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count }));
    } catch (error) {
      response.writeHead(500, { 'content-type': 'text/plain' }).end(String(error));
    }
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
