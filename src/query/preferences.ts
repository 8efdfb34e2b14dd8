/**
 * The Prefer header (PostgREST's Preferences): the count a read asks for, and the preferences
 * applied, echoed in Preference-Applied. Under `handling=strict` an unknown preference is 400
 * PGRST122; otherwise unknown preferences are ignored.
 */
import { apiError } from '../errors.ts';
import type { CountPreference, ReadSyntax } from './syntax.ts';

export type Preferences = Pick<ReadSyntax, 'count' | 'preferenceApplied'>;

const countValues = new Set<string>(['exact', 'planned', 'estimated'] satisfies CountPreference[]);
const knownPreferences = /^(count=(exact|planned|estimated)|handling=(strict|lenient)|return=(minimal|headers-only|representation)|resolution=(merge-duplicates|ignore-duplicates)|missing=(default|null)|tx=(commit|rollback)|timezone=.+|max-affected=\d+)$/;

const isCountPreference = (value: string | undefined): value is CountPreference => value !== undefined && countValues.has(value);

/** RFC 7240 style: comma-separated tokens over any number of headers; the first of each name wins. */
export function parsePreferences(headers: string | readonly string[] | undefined): Preferences {
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
  const countValue = first.get('count');
  const count = isCountPreference(countValue) ? countValue : null;
  const handling = first.get('handling');
  if (handling === 'strict' && invalid.length > 0) {
    throw apiError('PGRST122', invalid);
  }
  const preferenceApplied = [
    count ? `count=${count}` : null,
    handling === 'strict' || handling === 'lenient' ? `handling=${handling}` : null,
  ].filter((p): p is string => p !== null);
  return { count, preferenceApplied };
}
