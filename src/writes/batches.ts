/**
 * One batch, one transaction: validate every row, lock the university, load the state of the
 * whole batch, decide each row in pure code, apply set-based (a student batch validates while
 * the lock and its state read are on their way). A row that lost a race on a
 * service-wide unique address is decided once more; if it loses again it is CONCURRENT_WRITE.
 * A deadlock with another university's batch is such a race for every row the attempt changed:
 * the attempt runs in a savepoint, so the deadlock undoes it alone and never fails the batch.
 * A dry run (Prefer: tx=rollback) is the same work in the same transaction, rolled back at the end
 * instead of committed: its answer is the one the real write would give, and nothing stays. A
 * batch that wrote nothing is rolled back too (wroteNothing).
 * Whatever must be kept with the batch or not at all (an idempotency key's answer) is written in
 * its transaction before the commit (`beforeCommit`).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '../db/database.ts';
import { type Queryable, pipelined, statementsWritten } from '../db/store.ts';
import { pipelinedBatch } from '../db/locks.ts';
import { LOST_RACE_SQLSTATES, inSavepoint } from '../db/savepoint.ts';
import { todayUtc } from '../domain/alumni.ts';
import { type BatchAnswer, type Rejection, type WriteMode, batchRows, countOutcomes, droppedFields, echoedKey, reject } from './batch.ts';
import { applyCohortChanges, loadCohortState } from './cohort-store.ts';
import { COHORT_FIELDS, type CohortResult, cohortResult, decideCohortBatch, validateCohortRow } from './cohort-rules.ts';
import { STUDENT_FIELDS, sentStudentKeys, validateStudentBatch } from './student-rows.ts';
import { type StudentDecision, type StudentResult, decideStudentBatch, studentResult } from './student-rules.ts';
import { type NamedState, applyStudentChanges, loadStudentState, readNamedState } from './student-store.ts';

/** Internal retries before a row that keeps losing a race is reported CONCURRENT_WRITE. */
const RACE_RETRIES = 1;

/**
 * Runs `attempt` over the pending rows until none lose, at most 1 + RACE_RETRIES times; returns
 * the rows that lost every time.
 */
export async function settleRaces<R extends { index: number }>(rows: readonly R[], attempt: (pending: readonly R[]) => Promise<Set<number>>): Promise<R[]> {
  let pending = rows;
  for (let round = 0; round <= RACE_RETRIES && pending.length > 0; round++) {
    const lost = await attempt(pending);
    pending = pending.filter((r) => lost.has(r.index));
  }
  return [...pending];
}

/** Splits a batch into the rows that passed validation and, at their places, the rejected results. */
function splitValidated<Row, Rejected extends { rejected: Rejection }, Result>(
  validated: readonly ({ ok: Row } | Rejected)[],
  rejectedResult: (rejected: Rejected) => Result,
): { rows: Row[]; results: Result[] } {
  const rows: Row[] = [];
  const results: Result[] = [];
  validated.forEach((row, index) => {
    if ('ok' in row) rows.push(row.ok);
    else results[index] = rejectedResult(row);
  });
  return { rows, results };
}

/** How a batch's transaction ends: `dryRun` rolls it back once every row has its outcome. */
export interface WriteOptions {
  readonly dryRun: boolean;
  /**
   * Runs in the batch's transaction once the answer is known, so that what it writes commits with
   * the batch or not at all (the answer kept for an Idempotency-Key); a dry run rolls it back too.
   */
  readonly beforeCommit?: (tx: Queryable, answer: BatchAnswer) => Promise<void>;
}

/** Thrown out of a finished transaction that is not to commit, so that the store rolls it back; it carries the answer out. */
class RollBack<Answer> extends Error {
  constructor(readonly answer: Answer) {
    super('rolled back');
  }
}

/**
 * A batch that created and updated nothing (a replay: every row unchanged or rejected) wrote
 * nothing but its lock's change number (src/db/locks.ts): it rolls back, and gives the number
 * back, where a commit would flush that write to disk.
 */
const wroteNothing = (answer: BatchAnswer) => answer.counts.created === 0 && answer.counts.updated === 0;

/**
 * Runs `work` in one partner transaction of the university, committed or, for a dry run and a
 * batch that wrote nothing with nothing to keep (`beforeCommit`), rolled back.
 */
async function batchTransaction<Answer extends BatchAnswer>(
  db: Database, universityId: string, { dryRun, beforeCommit }: WriteOptions, work: (tx: Queryable) => Promise<Answer>,
): Promise<Answer> {
  try {
    return await db.asUniversity(universityId, async (tx) => {
      const answer = await work(tx);
      await beforeCommit?.(tx, answer);
      if (dryRun || (beforeCommit === undefined && wroteNothing(answer))) throw new RollBack(answer);
      return answer;
    });
  } catch (error) {
    if (!(error instanceof RollBack)) throw error;
    return error.answer as Answer;
  }
}

const isChange = (d: StudentDecision): d is Extract<StudentDecision, { kind: 'create' | 'update' }> => d.kind === 'create' || d.kind === 'update';

/**
 * A student batch. Its students and cohorts are read by every key its rows send, in one pipeline
 * with the lock (held before the state is read), and the rows are validated while that read is
 * on its way, not before it is sent: a 500-row replay on PostgreSQL answered 0.9–1.7 ms sooner
 * (paired medians of 400 interleaved replays, three runs), where validating its rows took
 * 0.6–1.2 ms in the service. On PGlite, which runs statements in the service's own thread, the
 * two take turns as before.
 */
export async function writeStudents(db: Database, universityId: string, mode: WriteMode, body: unknown, options: WriteOptions) {
  const batch = batchRows(body, 'students');
  const context = { mode, today: todayUtc(), newId: randomUUID };
  return batchTransaction(db, universityId, options, (tx) => pipelinedBatch(tx, universityId, async (changeSeq) => {
    const sentKeysRead = readNamedState(tx, universityId, sentStudentKeys(batch.rows));
    return pipelined(sentKeysRead, async () => {
      await statementsWritten();
      const { rows, results } = splitValidated(validateStudentBatch(batch.rows, mode),
        (v): StudentResult => ({ email: echoedKey(v.sentEmail), status: 'rejected', ...v.rejected }));
      // The first attempt decides on that read; a row decided again after a lost race is read again.
      let firstRead: Promise<NamedState> | undefined = sentKeysRead;
      const losers = await settleRaces(rows, async (pending) => {
        const state = await loadStudentState(tx, universityId, pending, firstRead);
        firstRead = undefined;
        const decisions = decideStudentBatch(pending, state, context);
        const changes = decisions.filter(isChange);
        // Nothing to write, nothing to race for: a replay sends no savepoint.
        const applied = changes.length === 0 ? { ok: new Set<number>() }
          : await inSavepoint(tx, LOST_RACE_SQLSTATES, async () => applyStudentChanges(tx, universityId, await changeSeq, changes));
        const lost = 'ok' in applied ? applied.ok : new Set(changes.map((c) => c.row.index));
        for (const d of decisions) if (!lost.has(d.row.index)) results[d.row.index] = studentResult(d);
        return lost;
      });
      for (const row of losers) {
        results[row.index] = { email: echoedKey(row.sentEmail), status: 'rejected', ...reject('CONCURRENT_WRITE', 'Another write raced this row at the same moment, and again on its retry; retry the row.') };
      }
      return {
        counts: countOutcomes(results),
        cohorts_created: 0,
        invitations_sent: 0,
        dropped_fields: droppedFields(batch, STUDENT_FIELDS),
        results,
      };
    });
  }));
}

export async function writeCohorts(db: Database, universityId: string, mode: WriteMode, body: unknown, options: WriteOptions) {
  const batch = batchRows(body, 'cohorts');
  const { rows, results } = splitValidated(batch.rows.map((row, index) => validateCohortRow(row, index, mode)),
    (v): CohortResult => ({ name: echoedKey(v.name), status: 'rejected', ...v.rejected }));
  return batchTransaction(db, universityId, options, (tx) => pipelinedBatch(tx, universityId, async (changeSeq) => {
    const state = await loadCohortState(tx, universityId, rows);
    const decisions = decideCohortBatch(rows, state, mode, randomUUID);
    await applyCohortChanges(tx, universityId, await changeSeq, state, decisions);
    for (const d of decisions) results[d.row.index] = cohortResult(d);
    return { counts: countOutcomes(results), dropped_fields: droppedFields(batch, COHORT_FIELDS), results };
  }));
}
