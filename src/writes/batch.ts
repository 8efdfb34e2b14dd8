/**
 * The envelope every batch write shares: the body's shape, the 500-row cap (checked before any
 * work), per-row outcomes and their counts.
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { WritableResource } from '../resources/write-shapes.ts';

export const WRITE_MODES = ['put', 'post', 'patch'] as const;
export type WriteMode = (typeof WRITE_MODES)[number];
/** A row's outcome; the response's `counts` has one counter each, in this order. */
export const ROW_STATUSES = ['created', 'updated', 'unchanged', 'rejected'] as const;
export type RowStatus = (typeof ROW_STATUSES)[number];

/** Why a row was not written; `Code` is the resource's row-code union (src/writes/row-codes.ts). */
export interface Rejection<Code extends string = string> {
  readonly code: Code;
  readonly message: string;
}

/** What every batch's answer holds, whatever its resource adds (src/writes/batches.ts). */
export interface BatchAnswer {
  readonly counts: Record<RowStatus, number>;
  readonly dropped_fields: readonly string[];
  readonly results: readonly { readonly status: RowStatus; readonly code?: string }[];
}

export const reject = <Code extends string>(code: Code, message: string): Rejection<Code> => ({ code, message });

/** The rows of `{ <key>: [ … ] }`, or a request-level error. */
export function batchRows(body: unknown, key: WritableResource): unknown[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw apiError('INVALID_BODY', `The body must be a JSON object of the form {"${key}": [...]}.`);
  }
  const rows = (body as Record<string, unknown>)[key];
  if (!Array.isArray(rows)) throw apiError('INVALID_BODY', `The body lacks the "${key}" array.`);
  if (rows.length > LIMITS.batchRows) throw apiError('BATCH_TOO_LARGE', rows.length);
  return rows;
}

export function countOutcomes(results: readonly { status: RowStatus }[]): Record<RowStatus, number> {
  const counts = Object.fromEntries(ROW_STATUSES.map((status) => [status, 0])) as Record<RowStatus, number>;
  for (const r of results) counts[r.status]++;
  return counts;
}

/** Names sent in any row that the record does not hold, sorted. */
export function droppedFields(rows: readonly unknown[], held: ReadonlySet<string>): string[] {
  const dropped = new Set<string>();
  for (const row of rows) {
    if (row && typeof row === 'object' && !Array.isArray(row)) {
      for (const key of Object.keys(row)) if (!held.has(key)) dropped.add(key);
    }
  }
  return [...dropped].sort();
}
