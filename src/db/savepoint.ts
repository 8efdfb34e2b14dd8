import { type DatabaseError, type Queryable, isDatabaseError } from './store.ts';

/**
 * Runs `fn` inside a savepoint. A failure whose SQLSTATE is in `undoable` rolls back `fn`'s
 * own statements only (a failed statement otherwise aborts the whole transaction) and is
 * returned; any other failure is thrown. Not reentrant: one savepoint name serves every call.
 */
export async function inSavepoint<T>(tx: Queryable, undoable: ReadonlySet<string>, fn: () => Promise<T>): Promise<{ ok: T } | { undone: DatabaseError }> {
  await tx.query('savepoint pds_attempt');
  try {
    const result = await fn();
    await tx.query('release savepoint pds_attempt');
    return { ok: result };
  } catch (error) {
    if (!isDatabaseError(error) || !undoable.has(error.code)) throw error;
    await tx.query('rollback to savepoint pds_attempt');
    return { undone: error };
  }
}
