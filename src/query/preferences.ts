/**
 * The Prefer header (PostgREST's Preferences): the count a read asks for, how a write's
 * transaction ends, and the preferences applied, echoed in Preference-Applied. Under
 * `handling=strict` a preference the request does not apply is 400 PGRST122: an unknown one, and
 * on a write PostgREST's own that a batch has no use for (`max-affected`, which PostgREST enforces
 * under strict handling, taken silently would guard nothing); otherwise they are ignored.
 */
import { apiError } from '../errors.ts';
import type { CountPreference, ReadSyntax } from './syntax.ts';

export type Preferences = Pick<ReadSyntax, 'count' | 'preferenceApplied' | 'refusedPreferences'>;

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
/**
 * What a read applies, and what a batch write applies. A read also takes, unechoed, PostgREST's
 * preferences that change nothing for a read (how a write answers, resolves, fills and ends, its
 * bound on rows affected), which PostgREST takes under strict handling too.
 */
const READ_APPLIES = new RegExp(`^(count=(exact|planned|estimated)|handling=(strict|lenient)|timezone=${UTC}`
  + '|return=(minimal|headers-only|representation)|resolution=(merge-duplicates|ignore-duplicates)|missing=(default|null)|tx=(commit|rollback)|max-affected=\\d+)$');
const WRITE_APPLIES = new RegExp(`^(tx=(commit|rollback)|handling=(strict|lenient)|timezone=${UTC})$`);

const isCountPreference = (value: string | undefined): value is CountPreference => value !== undefined && countValues.has(value);
const isTransactionEnd = (value: string | undefined): value is TransactionEnd => value !== undefined && transactionEnds.has(value);

/** The preferences whose values this service enumerates: compared case-insensitively, as their names are. */
const ENUMERATED = new Set(['tx', 'count', 'handling']);

/** One preference: its name and value as compared (`name=value`, or the name alone), and as it was sent. */
interface Preference {
  readonly name: string;
  readonly value: string;
  readonly canonical: string;
  readonly sent: string;
}

/**
 * Splits at each `separator` outside a quoted string (a `\` escaping the character after it).
 * A quote left open splits plainly: `foo="bar, tx=rollback` kept the dry run's `tx` inside it.
 */
function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (quoted && text[i] === '\\') i++;
    else if (text[i] === '"') quoted = !quoted;
    else if (!quoted && text[i] === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  return quoted ? text.split(separator) : [...parts, text.slice(start)];
}

/**
 * The preferences of the Prefer headers as RFC 7240 writes them: comma-separated over any number
 * of headers, each `name[=value]` with optional whitespace around `=`, a value a token or a
 * quoted string, then `;`-parameters, which no preference here takes and which are dropped.
 * Names compare case-insensitively (RFC 7240, section 2). Read as literal text, `tx = rollback`,
 * `TX=rollback` or `tx="rollback"` was no preference at all, and the dry run committed.
 */
function splitPreferences(headers: string | readonly string[] | undefined): Preference[] {
  return (typeof headers === 'string' ? [headers] : headers ?? [])
    .flatMap((header) => splitOutsideQuotes(header, ','))
    .map((element) => element.trim())
    .filter(Boolean)
    .map((sent) => {
      const [head] = splitOutsideQuotes(sent, ';');
      const equals = head.indexOf('=');
      const name = (equals < 0 ? head : head.slice(0, equals)).trim().toLowerCase();
      if (equals < 0) return { name, value: '', canonical: name, sent };
      let value = head.slice(equals + 1).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1).replace(/\\(.)/g, '$1');
      if (ENUMERATED.has(name)) value = value.toLowerCase();
      return { name, value, canonical: `${name}=${value}`, sent };
    });
}

/**
 * The first value of each preference name, the `handling` echo, and under strict handling the
 * preferences sent that the request does not apply (`applies`), which it refuses (PGRST122).
 */
function readPreferences(headers: string | readonly string[] | undefined, applies: RegExp): { first: Map<string, string>; handlingApplied: string | null; timezoneApplied: string | null; refused: string[] } {
  const first = new Map<string, string>();
  const invalid: string[] = [];
  for (const { name, value, canonical, sent } of splitPreferences(headers)) {
    if (!applies.test(canonical)) invalid.push(sent);
    if (!first.has(name)) first.set(name, value);
  }
  const handling = first.get('handling');
  return {
    first,
    handlingApplied: handling === 'strict' || handling === 'lenient' ? `handling=${handling}` : null,
    timezoneApplied: first.get('timezone') === UTC ? `timezone=${UTC}` : null,
    refused: handling === 'strict' ? invalid : [],
  };
}

/**
 * A read's preferences; Preference-Applied lists them in PostgREST's order: count, handling,
 * timezone. The planner refuses the unapplied ones, after the Accept header as PostgREST does.
 */
export function parsePreferences(headers: string | readonly string[] | undefined): Preferences {
  const { first, handlingApplied, timezoneApplied, refused } = readPreferences(headers, READ_APPLIES);
  const countValue = first.get('count');
  const count = isCountPreference(countValue) ? countValue : null;
  const preferenceApplied = [count ? `count=${count}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { count, preferenceApplied, refusedPreferences: refused };
}

/** A batch write's preferences; Preference-Applied lists them in PostgREST's order: tx, handling, timezone. */
export function parseWritePreferences(headers: string | readonly string[] | undefined): WritePreferences {
  const { first, handlingApplied, timezoneApplied, refused } = readPreferences(headers, WRITE_APPLIES);
  if (refused.length > 0) throw apiError('PGRST122', refused);
  const txValue = first.get('tx');
  const tx = isTransactionEnd(txValue) ? txValue : null;
  const preferenceApplied = [tx ? `tx=${tx}` : null, handlingApplied, timezoneApplied].filter((p): p is string => p !== null);
  return { tx: tx ?? 'commit', preferenceApplied };
}
