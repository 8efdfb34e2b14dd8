import { type Queryable, pipelined } from './store.ts';

/**
 * Serialises every change to one university's students and cohorts: partner batches and the
 * app's events on a student. A batch then reads a state no one else changes before it commits.
 * The lock is the university's row of `tenants`, taken by an upsert (which creates the row the
 * first time): a row lock holds on whichever node stores the row, so it serialises every
 * instance of the service and every coordinator of a Citus cluster alike, where an advisory
 * lock would hold only on the node that took it. `$1` is the university id.
 *
 * The same statement counts the change: it answers the university's next change number, which
 * the transaction stamps on every student and cohort row it writes (change_seq, migration 006).
 * The row lock is held to commit, so a number is drawn only once the previous one committed or
 * rolled back: per university the numbers are in commit order, which is what lets the change
 * feed (src/query/changes.ts) follow them without skipping a change. A rolled-back transaction
 * (a dry run, a batch that wrote nothing) gives its number back.
 */
export const UNIVERSITY_LOCK = `insert into tenants (university_id, change_seq) values ($1::uuid, 1)
  on conflict (university_id) do update set change_seq = tenants.change_seq + 1 returning change_seq`;

/** Locks the university; answers the transaction's change number (see UNIVERSITY_LOCK). */
export async function lockUniversity(tx: Queryable, universityId: string): Promise<ChangeSeq> {
  const [row] = await tx.query<{ change_seq: string | number | bigint }>(UNIVERSITY_LOCK, [universityId]);
  return String(row.change_seq);
}

/** A transaction's change number as the statements that stamp it take it: the bigint's text. */
export type ChangeSeq = string;

/**
 * How a batch's transaction plans its statements (run by beginBatch, and by the write
 * benchmark's floors, bench/floors/student-writes.ts): for their actual arrays, by key, and on
 * Citus across shards in order. On Citus a statement that touches several shards (the
 * address register's claims) visits them one after another, in shard order, so two batches
 * claiming the same addresses take them in the same order and cannot deadlock across nodes;
 * elsewhere the setting is an inert placeholder.
 * A prepared statement's generic plan cannot see that an array holds 500 keys; on tables with
 * thin statistics (a new deployment, a fresh tenant) it became a nested loop over every row of
 * the university for each key (measured: 56 ms per lookup instead of 3).
 * A batch reads and writes a few hundred rows by key, of a university whose rows are in memory
 * (PGlite's always are): random_page_cost 1.1, not 4, so that the planner does not prefer a
 * scan of the whole university to those lookups. At a university of 10,000 students on PGlite,
 * a 500-row state read scanned it in 6.4 ms, and looks its rows up by key in 3.9.
 */
export const BATCH_PLANNING = `select set_config('plan_cache_mode', 'force_custom_plan', true),
  set_config('random_page_cost', '1.1', true), set_config('citus.multi_shard_modify_mode', 'sequential', true)`;

/** Locks the university for a batch (answering its change number), planning as BATCH_PLANNING says. */
async function beginBatch(tx: Queryable, universityId: string): Promise<ChangeSeq> {
  const [, changeSeq] = await Promise.all([
    tx.query(BATCH_PLANNING),
    lockUniversity(tx, universityId),
  ]);
  return changeSeq;
}

/**
 * beginBatch, and `work` sent right behind it in one pipeline (the lock is held before the
 * batch's state is read); `work` awaits the change number only when it writes.
 */
export function pipelinedBatch<T>(tx: Queryable, universityId: string, work: (changeSeq: Promise<ChangeSeq>) => Promise<T>): Promise<T> {
  const locked = beginBatch(tx, universityId);
  return pipelined(locked, () => work(locked));
}
