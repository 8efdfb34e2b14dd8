/**
 * The Prefer header (PostgREST's Preferences): the count a read asks for, how a write's
 * transaction ends, and the preferences applied, echoed in Preference-Applied. Under
 * `handling=strict` a preference the request does not apply is 400 PGRST122: an unknown one, and
 * PostgREST's own that this interface has no use for (`max-affected`, which PostgREST enforces
 * under strict handling, taken silently would guard nothing); otherwise they are ignored.
 */
import { apiError } from '../errors.ts';
import type { CountPreference, ReadSyntax } from './syntax.ts';

export type Preferences = Pick<ReadSyntax, 'count' | 'preferenceApplied'>;

/** `tx=rollback` makes a write a dry run; `tx=commit` is the default, honoured when asked for. */
export type TransactionEnd = 'commit' | 'rollback';

export interface WritePreferences {
  readonly tx: TransactionEnd;
  readonly preferenceApplied: readonly string[];
}

/**
 * The one time zone answers are given in (docs/decisions.md, Resources and reads): `timezone=UTC` is
 * honoured and echoed; any other zone is not, so it is ignored, or 400 PGRST122 under strict
 * handling, as PostgREST treats a zone it cannot apply.
 */
const UTC = 'UTC';

const countValues = new Set<string>(['exact', 'planned', 'estimated'] satisfies CountPreference[]);
const transactionEnds = new Set<string>(['commit', 'rollback'] satisfies TransactionEnd[]);
/** What a read applies, and what a batch write applies. */
const READ_APPLIES = new RegExp(`^(count=(exact|planned|estimated)|handling=(strict|lenient)|timezone=${UTC})$`);
const WRITE_APPLIES = new RegExp(`^(tx=(commit|rollback)|handling=(strict|lenient)|timezone=${UTC})$`);

const isCountPreference = (value: string | undefined): value is CountPreference => value !== undefined && countValues.has(value);
const isTransactionEnd = (value: string | undefined): value is TransactionEnd => value !== undefined && transactionEnds.has(value);

/**
 * RFC 7240 style: comma-separated tokens over any number of headers; the first of each name wins.
 * Returns each preference's first value and the `handling` echo, or PGRST122 under strict handling
 * when a preference is not one the request `applies`.
 */
function readPreferences(headers: string | readonly string[] | undefined, applies: RegExp): { first: Map<string, string>; handlingApplied: string | null; timezoneApplied: string | null } {
  const tokens = (typeof headers === 'string' ? [headers] : headers ?? [])
    .flatMap((h) => h.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  const first = new Map<string, string>();
  const invalid: string[] = [];
  for (const token of tokens) {
    if (!applies.test(token)) invalid.push(token);
    const [name, value = ''] = token.split('=', 2);
    if (!first.has(name)) first.set(name, value);
  }
  const handling = first.get('handling');
  if (handling === 'strict' && invalid.length > 0) {
    throw apiError('PGRST122', invalid);
  }
  return {
    first,
    handlingApplied: handling === 'strict' || handling === 'lenient' ? `handling=${handling}` : null,
    timezoneApplied: first.get('timezone') === UTC ? `timezone=${UTC}` : null,
  };
}

/** A read's preferences; Preference-Applied lists them in PostgREST's order: count, handling, timezone. */
export function parsePreferences(headers: string | readonly string[] | undefined): Preferences {
  const { first, handlingApplied, timezoneApplied } = readPreferences(headers, READ_APPLIES);
  const countValue = first.get('count');
  const count = isCountPreference(countValue) ? countValue : null;
  const preferenceApplied = [count ? `count=${count}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { count, preferenceApplied };
}

/** A batch write's preferences; Preference-Applied lists them in PostgREST's order: tx, handling, timezone. */
export function parseWritePreferences(headers: string | readonly string[] | undefined): WritePreferences {
  const { first, handlingApplied, timezoneApplied } = readPreferences(headers, WRITE_APPLIES);
  const txValue = first.get('tx');
  const tx = isTransactionEnd(txValue) ? txValue : null;
  const preferenceApplied = [tx ? `tx=${tx}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { tx: tx ?? 'commit', preferenceApplied };
}
