/**
 * The write side of the change feed (src/query/changes.ts): what a transaction writes, beside the
 * rows it changes, so that the feed shows every change to what `students_read` and `cohorts_read`
 * answer. Each changed row carries the transaction's change number (src/db/locks.ts); these
 * cover the changes that reach a row without a write to it:
 * - a cohort's `student_count` moves when a student joins it, leaves it or is erased;
 * - an erased row is gone, so it leaves a tombstone holding only its id.
 */
import { arrayLiteral } from '../db/array-literal.ts';
import type { ChangeSeq } from '../db/locks.ts';
import type { Queryable } from '../db/store.ts';
import type { FeedResource } from '../resources/registry.ts';

/**
 * The statement that stamps the cohorts whose student count the transaction changed; none, no
 * statement. Their `updated_at` stays: the cohort itself did not change, only the count the read derives.
 */
export function cohortCountStamp(universityId: string, changeSeq: ChangeSeq, cohortIds: Iterable<string | null>): [string, (string | null)[]] | null {
  const ids = [...new Set([...cohortIds].filter((id): id is string => id !== null))];
  if (ids.length === 0) return null;
  return ['update cohorts set change_seq = $2::bigint where university_id = $1 and id = any($3::uuid[])',
    [universityId, changeSeq, arrayLiteral(ids)]];
}

/** Runs cohortCountStamp's statement, if there is one. */
export async function stampCohortCounts(tx: Queryable, universityId: string, changeSeq: ChangeSeq, cohortIds: Iterable<string | null>): Promise<void> {
  const statement = cohortCountStamp(universityId, changeSeq, cohortIds);
  if (statement) await tx.query(...statement);
}

/** Records that a row was erased: its id and the change number, nothing else. */
export async function recordTombstone(tx: Queryable, universityId: string, changeSeq: ChangeSeq, resource: FeedResource, id: string): Promise<void> {
  await tx.query('insert into change_tombstones (university_id, change_seq, resource, id) values ($1::uuid, $2::bigint, $3, $4::uuid)',
    [universityId, changeSeq, resource, id]);
}
