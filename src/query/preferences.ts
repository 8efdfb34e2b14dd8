/**
 * The Prefer header (PostgREST's Preferences): the count a read asks for, how a write's
 * transaction ends, and the preferences applied, echoed in Preference-Applied. Under
 * `handling=strict` an unknown preference is 400 PGRST122; otherwise unknown preferences are ignored.
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
const knownPreferences = new RegExp(`^(count=(exact|planned|estimated)|handling=(strict|lenient)|return=(minimal|headers-only|representation)|resolution=(merge-duplicates|ignore-duplicates)|missing=(default|null)|tx=(commit|rollback)|timezone=${UTC}|max-affected=\\d+)$`);

const isCountPreference = (value: string | undefined): value is CountPreference => value !== undefined && countValues.has(value);
const isTransactionEnd = (value: string | undefined): value is TransactionEnd => value !== undefined && transactionEnds.has(value);

/**
 * RFC 7240 style: comma-separated tokens over any number of headers; the first of each name wins.
 * Returns each preference's first value and the `handling` echo, or PGRST122 under strict handling.
 */
function readPreferences(headers: string | readonly string[] | undefined): { first: Map<string, string>; handlingApplied: string | null; timezoneApplied: string | null } {
  const tokens = (typeof headers === 'string' ? [headers] : headers ?? [])
    .flatMap((h) => h.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  const first = new Map<string, string>();
  const invalid: string[] = [];
  for (const token of tokens) {
    if (!knownPreferences.test(token)) invalid.push(token);
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
  const { first, handlingApplied, timezoneApplied } = readPreferences(headers);
  const countValue = first.get('count');
  const count = isCountPreference(countValue) ? countValue : null;
  const preferenceApplied = [count ? `count=${count}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { count, preferenceApplied };
}

/** A batch write's preferences; Preference-Applied lists them in PostgREST's order: tx, handling, timezone. */
export function parseWritePreferences(headers: string | readonly string[] | undefined): WritePreferences {
  const { first, handlingApplied, timezoneApplied } = readPreferences(headers);
  const txValue = first.get('tx');
  const tx = isTransactionEnd(txValue) ? txValue : null;
  const preferenceApplied = [tx ? `tx=${tx}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { tx: tx ?? 'commit', preferenceApplied };
}
