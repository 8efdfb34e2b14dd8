import type { Queryable } from './store.ts';

/**
 * Serialises every change to one university's students and cohorts: partner batches and the
 * app's events on a student. A batch then reads a state no one else changes before it commits.
 * The lock is the university's row of `tenants`, taken by an upsert (which creates the row the
 * first time): a row lock holds on whichever node stores the row, so it serialises every
 * instance of the service and every coordinator of a Citus cluster alike, where an advisory
 * lock would hold only on the node that took it. `$1` is the university id.
 */
const UNIVERSITY_LOCK = `insert into tenants (university_id) values ($1::uuid)
  on conflict (university_id) do update set university_id = excluded.university_id`;

export async function lockUniversity(tx: Queryable, universityId: string): Promise<void> {
  await tx.query(UNIVERSITY_LOCK, [universityId]);
}

/**
 * Locks the university for a batch, and plans the batch's statements for their actual arrays.
 * On Citus a statement that touches several shards (the address register's claims) visits them
 * one after another, in shard order, so two batches claiming the same addresses take them in
 * the same order and cannot deadlock across nodes; elsewhere the setting is an inert placeholder.
 * A prepared statement's generic plan cannot see that an array holds 500 keys; on tables with
 * thin statistics (a new deployment, a fresh tenant) it became a nested loop over every row of
 * the university for each key (measured: 56 ms per lookup instead of 3).
 */
export async function beginBatch(tx: Queryable, universityId: string): Promise<void> {
  await Promise.all([
    tx.query(`select set_config('plan_cache_mode', 'force_custom_plan', true), set_config('citus.multi_shard_modify_mode', 'sequential', true)`),
    lockUniversity(tx, universityId),
  ]);
}
