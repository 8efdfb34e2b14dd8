/**
 * The envelope every batch write shares: the body's shape, the 500-row cap (checked before any
 * work), per-row outcomes and their counts.
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { WritableResource } from '../resources/write-shapes.ts';
import { asObject } from './field-checks.ts';

export const WRITE_MODES = ['put', 'post', 'patch'] as const;
export type WriteMode = (typeof WRITE_MODES)[number];
/** A row's outcome; the response's `counts` has one counter each, in this order. */
export const ROW_STATUSES = ['created', 'updated', 'unchanged', 'rejected'] as const;
export type RowStatus = (typeof ROW_STATUSES)[number];
/** What the rules decided for a row (src/writes/student-rules.ts, cohort-rules.ts). */
export type DecisionKind = 'create' | 'update' | 'unchanged' | 'reject';
/** The outcome a row's result reports for each decision. */
export const STATUS_OF_DECISION: Readonly<Record<DecisionKind, RowStatus>> = {
  create: 'created', update: 'updated', unchanged: 'unchanged', reject: 'rejected',
};

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

/** A row's key (its email, a cohort's name) as its result echoes it: cut at LIMITS.echoedKeyChars. */
export const echoedKey = <Key extends string | null>(sent: Key): Key =>
  (sent !== null && sent.length > LIMITS.echoedKeyChars ? `${sent.slice(0, LIMITS.echoedKeyChars)}…` : sent) as Key;

export const reject = <Code extends string>(code: Code, message: string): Rejection<Code> => ({ code, message });

/** A batch's rows as sent, and the field names they use between them. */
export interface BatchRows {
  readonly rows: readonly unknown[];
  readonly fieldNames: ReadonlySet<string>;
}

/** The rows of `{ <key>: [ … ] }` and their field names, or a request-level error. */
export function batchRows(body: unknown, key: WritableResource): BatchRows {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw apiError('INVALID_BODY', `The body must be a JSON object of the form {"${key}": [...]}.`);
  }
  const rows = (body as Record<string, unknown>)[key];
  if (!Array.isArray(rows)) throw apiError('INVALID_BODY', `The body lacks the "${key}" array.`);
  if (rows.length > LIMITS.batchRows) throw apiError('BATCH_TOO_LARGE', rows.length);
  return { rows, fieldNames: fieldNamesOf(rows) };
}

/** The field names of the rows that are objects, within LIMITS.batchFieldNames and LIMITS.fieldNameChars. */
function fieldNamesOf(rows: readonly unknown[]): Set<string> {
  const names = new Set<string>();
  for (const row of rows) {
    for (const name in asObject(row) ?? {}) {
      if (names.has(name)) continue;
      if (name.length > LIMITS.fieldNameChars) {
        throw apiError('INVALID_BODY', `A row names a field of more than ${LIMITS.fieldNameChars} characters.`);
      }
      names.add(name);
      if (names.size > LIMITS.batchFieldNames) {
        throw apiError('INVALID_BODY', `The rows name more than ${LIMITS.batchFieldNames} distinct fields between them.`);
      }
    }
  }
  return names;
}

export function countOutcomes(results: readonly { status: RowStatus }[]): Record<RowStatus, number> {
  const counts = Object.fromEntries(ROW_STATUSES.map((status) => [status, 0])) as Record<RowStatus, number>;
  for (const r of results) counts[r.status]++;
  return counts;
}

/** Names sent in any row that the record does not hold, sorted. */
export const droppedFields = ({ fieldNames }: BatchRows, held: ReadonlySet<string>): string[] =>
  [...fieldNames].filter((name) => !held.has(name)).sort();
