import { PostgresError } from 'pg-error-enum';
import { type DatabaseError, type Queryable, isDatabaseError, pipelined } from './store.ts';

/**
 * The failures that mean a transaction lost a race with another and would succeed if run again:
 * a serialization failure (40001) and a deadlock (40P01). A batch decides such rows again
 * (src/writes/batches.ts) and an operator transaction runs once more (Database.asOperator,
 * src/db/database.ts); what still fails answers 503 CONCURRENT_WRITE (src/http/sqlstates.ts).
 */
export const LOST_RACE_SQLSTATES: ReadonlySet<string> = new Set([PostgresError.T_R_SERIALIZATION_FAILURE, PostgresError.T_R_DEADLOCK_DETECTED]);

/**
 * Runs `fn` inside a savepoint. A failure whose SQLSTATE is in `undoable` rolls back `fn`'s
 * own statements only (a failed statement otherwise aborts the whole transaction) and is
 * returned; any other failure is thrown. The savepoint travels in one pipeline with `fn`'s first
 * statements, and is not released: the transaction's end releases it, and a RELEASE would cost a
 * round trip of its own. A later call makes a savepoint of the same name, which the rollback of a
 * later failure names (the newest of that name), so calls may follow one another; they may not nest.
 */
export async function inSavepoint<T>(tx: Queryable, undoable: ReadonlySet<string>, fn: () => Promise<T>): Promise<{ ok: T } | { undone: DatabaseError }> {
  try {
    return { ok: await pipelined(tx.query('savepoint pds_attempt'), fn) };
  } catch (error) {
    if (!isDatabaseError(error) || !undoable.has(error.code)) throw error;
    await tx.query('rollback to savepoint pds_attempt');
    return { undone: error };
  }
}
