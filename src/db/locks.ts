import type { Queryable } from './store.ts';

/**
 * Serialises every change to one university's students and cohorts: partner batches and the
 * app's events on a student. A batch then reads a state no one else changes before it commits.
 */
export async function lockUniversity(tx: Queryable, universityId: string): Promise<void> {
  await tx.query(`select pg_advisory_xact_lock(hashtext('pds.university:' || $1::text))`, [universityId]);
}
