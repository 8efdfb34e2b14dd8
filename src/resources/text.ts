/**
 * The character rules and the named lengths every stored string obeys; which field takes which
 * length is its write shape's (src/resources/write-shapes.ts). PostgreSQL refuses a NUL in
 * text (22021) and an index key over 2,704 bytes (54000); either fails the whole statement, so
 * both are kept out by validation, row by row, and a key looked up before its row is validated
 * is left out when it holds a NUL (src/writes/student-rows.ts, sentStudentKeys). Lengths count
 * characters (code points), as JSON Schema's maxLength does; 200 characters are at most 800
 * bytes of UTF-8. They hold for a value as stored, trimmed: a name padded past its length with
 * spaces it loses was refused, and so was an address or a name with the line break or tab a
 * spreadsheet's export leaves at its end (`"ada@u.edu\r"`), which trimming removes.
 * An unpaired surrogate (JSON's `"\ud800"`) is refused as well: UTF-8 cannot carry one, so the
 * driver stores U+FFFD in its place, and a name or key matched as sent would not match what was
 * stored (a PUT of cohort `"a\ud800"` created a new cohort of that name on every replay).
 */

/** RFC 5321's limit on an address in a mail path. */
export const MAX_EMAIL_LENGTH = 254;
/** Names, labels and other human-readable single-line text. */
export const MAX_NAME_LENGTH = 200;
/** A university's student number; real ones are under 20 characters. */
export const MAX_EXTERNAL_ID_LENGTH = 100;
/** E.164: a plus and at most 15 digits. */
export const MAX_PHONE_LENGTH = 16;
/** E.164 (INVALID_PHONE otherwise), as a pattern for the description's schemas too. */
export const PHONE_PATTERN = '^\\+[1-9][0-9]{1,14}$';

/** Unicode control characters (C0, DEL and C1) and line breaks (U+2028, U+2029): none belongs in a single-line field. */
const CONTROL_CHARACTER = /[\p{Cc}\p{Zl}\p{Zp}]/u;
/**
 * What no single-line field takes: a control character or line break, or a surrogate that is not
 * half of a pair (`u` reads a pair as one code point).
 */
const REFUSED_CHARACTER = /[\p{Cc}\p{Zl}\p{Zp}\p{Cs}]/u;

/**
 * The same rule as a JSON Schema pattern, for request schemas, with the white space trimming
 * removes (ECMAScript's `\s`, String.prototype.trim's set) taken at either end. JSON Schema
 * 2020-12 (OpenAPI 3.1's dialect) reads patterns with the `u` flag, as Ajv does, where a pair is
 * one code point outside the surrogate range; generators that build `new RegExp(pattern)`
 * without it (orval's zod) read a pair as two surrogates, so a pair is taken explicitly too:
 * without it they refused every name with an emoji or a character past U+FFFF, which the service
 * takes.
 */
export const SINGLE_LINE_TEXT_PATTERN = '^\\s*(?:[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*\\s*$';

/** A name: single-line text with something besides white space (a lookahead before the same rule). */
export const NAME_PATTERN = `^(?=[\\s\\S]*\\S)${SINGLE_LINE_TEXT_PATTERN.slice(1)}`;

/** What each of these patterns asks of a value, in words, for a refusal's message (Ajv's quotes the pattern). */
export const PATTERN_MEANINGS: Readonly<Record<string, string>> = {
  [SINGLE_LINE_TEXT_PATTERN]: 'must be single-line text, without control characters or unpaired surrogates',
  [NAME_PATTERN]: 'must not be blank, and must be single-line text without control characters or unpaired surrogates',
  [PHONE_PATTERN]: 'must be a phone number in E.164 form: a plus and up to 15 digits',
};

/** Whether the string holds a character no single-line field takes (see REFUSED_CHARACTER); callers pass it trimmed. */
export const hasRefusedCharacter = (value: string) => REFUSED_CHARACTER.test(value);

const ASCII = /^[\x00-\x7f]*$/;
/** Whether the string is ASCII alone, which many checks of Unicode text can skip. */
export const isAscii = (value: string) => ASCII.test(value);

/** Whether the string holds a NUL, which PostgreSQL refuses in text: the whole statement fails (22021). */
export const hasNul = (value: string) => value.includes('\u0000');

const characterCount = (value: string) => {
  let count = 0;
  for (const _ of value) count++;
  return count;
};

/** Whether `value` holds more than `maxLength` characters (code points, as JSON Schema's maxLength counts). */
export const longerThan = (value: string, maxLength: number) => value.length > maxLength && characterCount(value) > maxLength;

/** Why `value` is not acceptable single-line text of at most `maxLength` characters once trimmed, or null. */
export function textProblem(field: string, value: string, maxLength: number): string | null {
  const stored = value.trim();
  if (hasRefusedCharacter(stored)) {
    return CONTROL_CHARACTER.test(stored) ? `${field} must not contain control characters (such as NUL, tab or line breaks); white space at either end is trimmed.`
      : `${field} must be Unicode text: it holds an unpaired surrogate (a lone \\ud800-\\udfff escape).`;
  }
  if (longerThan(stored, maxLength)) return `${field} must be at most ${maxLength} characters.`;
  return null;
}
