/**
 * The pattern guard: `match`/`imatch` (PostgreSQL regular expressions) and `like`/`ilike` values
 * that could run away are refused before any SQL runs. This matters most on the embedded store,
 * which cannot interrupt a running statement: on one 1,000-character résumé, `(.+)\1x` took
 * 0.9 s and `((.{1,50}){1,50}){1,50}x[^p]` 45 ms, so a page of them holds every tenant for minutes.
 */
import { parseArrayLiteral } from '../db/array-literal.ts';
import { type ApiError, apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { ComparisonOperator } from './syntax.ts';

export const PATTERN_OPERATORS: ReadonlySet<ComparisonOperator> = new Set(['like', 'ilike', 'match', 'imatch']);

const REGEX_OPERATORS: ReadonlySet<ComparisonOperator> = new Set(['match', 'imatch']);

const patternTooComplex = (op: string, pattern: string, reason: string): ApiError => apiError('PATTERN_TOO_COMPLEX', op, pattern, reason);

/** The patterns of an `any`/`all` list; a value that is no array literal is one pattern. */
export const arrayLiteralElements = (literal: string): string[] =>
  parseArrayLiteral(literal)?.filter((e): e is string => e !== null) ?? [literal];

const BOUND = /^\{(\d+)(?:,(\d*))?\}/;

/** PostgreSQL's embedded options (its documentation, table "ARE Embedded-Option Letters") that leave advanced syntax as it is. */
const SYNTAX_KEEPING_OPTIONS: ReadonlySet<string> = new Set(['c', 'i', 'm', 'n', 'p', 's', 't', 'w']);

/** Index just past the bracket expression that opens at `start` (`[^]a-z[:alpha:]\]]`). */
function bracketEnd(pattern: string, start: number): number {
  let i = start + 1;
  if (pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  while (i < pattern.length && pattern[i] !== ']') {
    if (pattern[i] === '\\') i += 2;
    else if (pattern[i] === '[' && ':.='.includes(pattern[i + 1] ?? '')) {
      const close = pattern.indexOf(`${pattern[i + 1]}]`, i + 2);
      i = close < 0 ? pattern.length : close + 2;
    } else i++;
  }
  return i + 1;
}

/**
 * Why a regular expression (PostgreSQL's advanced syntax) is refused, or null. The scan is
 * conservative: it may refuse an unusual valid pattern, never accept a back-reference or a
 * nested repetition.
 */
export function regexComplaint(pattern: string): string | null {
  let body = pattern;
  if (body.startsWith('***=')) return null;
  if (body.startsWith('***:')) body = body.slice(4);
  const options = /^\(\?([a-z]*)\)/.exec(body);
  if (options) {
    if (options[1].includes('q')) return null;
    // The scan below reads advanced syntax. Basic syntax (b) groups with \( \), which it reads as
    // escapes; expanded syntax (x) puts spaces between a group and its repetition, and extended
    // syntax (e) reads a backslash in brackets as itself: `(?x)((.{1,30}) {1,30}) {1,30}x` ran
    // for seconds per row (and broke the embedded store's session). The case and newline
    // options, and tight syntax (t, the default), change nothing the scan reads.
    const syntax = [...options[1]].find((option) => !SYNTAX_KEEPING_OPTIONS.has(option));
    if (syntax !== undefined) return `the embedded option (?${syntax}) is not accepted; only ${[...SYNTAX_KEEPING_OPTIONS].join(', ')} are`;
    body = body.slice(options[0].length);
  }
  let repetitions = 0;
  /** For each open group: does it hold a repetition? */
  const groups: boolean[] = [];
  let previous: 'nothing' | 'atom' | 'repeating group' | 'repetition' = 'nothing';
  for (let i = 0; i < body.length;) {
    const ch = body[i];
    const bound = ch === '{' ? BOUND.exec(body.slice(i)) : null;
    if (ch === '*' || ch === '+' || ch === '?' || bound) {
      if (ch === '?' && previous === 'repetition') {
        i++; // a non-greedy marker, not a repetition of its own
        continue;
      }
      if (previous === 'repeating group') return 'a repeated group holds a repetition itself';
      if (bound && Math.max(Number(bound[1]), Number(bound[2] || 0)) > LIMITS.maxRepetitionBound) {
        return `a bound exceeds {${LIMITS.maxRepetitionBound}}`;
      }
      if (++repetitions > LIMITS.maxPatternRepetitions) return `more than ${LIMITS.maxPatternRepetitions} repetitions`;
      if (groups.length > 0) groups[groups.length - 1] = true;
      previous = 'repetition';
      i += bound ? bound[0].length : 1;
    } else if (ch === '\\') {
      if (/[1-9]/.test(body[i + 1] ?? '')) return 'back-references (\\1…\\9) are not accepted';
      previous = 'atom';
      i += 2;
    } else if (ch === '[') {
      previous = 'atom';
      i = bracketEnd(body, i);
    } else if (ch === '(') {
      groups.push(false);
      previous = 'nothing';
      const lookaround = /^\(\?(?::|=|!|<=|<!)/.exec(body.slice(i));
      i += lookaround ? lookaround[0].length : 1;
    } else if (ch === ')') {
      const repeats = groups.pop() ?? false;
      if (repeats && groups.length > 0) groups[groups.length - 1] = true;
      previous = repeats ? 'repeating group' : 'atom';
      i++;
    } else {
      previous = 'atom';
      i++;
    }
  }
  return null;
}

/**
 * Throws 400 PATTERN_TOO_COMPLEX for a pattern that could run away. `like`/`ilike` need only
 * the length cap: PostgreSQL's LIKE matcher gives up as soon as the text runs out (16 wildcards
 * over a 1,000-character résumé: 1 ms).
 */
export function checkPattern(op: ComparisonOperator, value: string, quantified: boolean): void {
  for (const pattern of quantified ? arrayLiteralElements(value) : [value]) {
    if (pattern.length > LIMITS.maxPatternLength) {
      throw patternTooComplex(op, pattern, `it is longer than ${LIMITS.maxPatternLength} characters`);
    }
    const complaint = REGEX_OPERATORS.has(op) ? regexComplaint(pattern) : null;
    if (complaint) throw patternTooComplex(op, pattern, complaint);
  }
}
