/**
 * The character rules and the named lengths every stored string obeys; which field takes which
 * length is its write shape's (src/resources/write-shapes.ts). PostgreSQL refuses a NUL in
 * text (22021) and an index key over 2,704 bytes (54000); either fails the whole statement, so
 * both are kept out by validation, row by row, and a key looked up before its row is validated
 * is left out when it holds a NUL (src/writes/student-rows.ts, sentStudentKeys). Lengths count
 * characters (code points), as JSON Schema's maxLength does; 200 characters are at most 800
 * bytes of UTF-8.
 */

/** RFC 5321's limit on an address in a mail path. */
export const MAX_EMAIL_LENGTH = 254;
/** Names, labels and other human-readable single-line text. */
export const MAX_NAME_LENGTH = 200;
/** A university's student number; real ones are under 20 characters. */
export const MAX_EXTERNAL_ID_LENGTH = 100;
/** E.164: a plus and at most 15 digits. */
export const MAX_PHONE_LENGTH = 16;

/** Unicode control characters (C0, DEL and C1): none belongs in a single-line field. */
const CONTROL_CHARACTER = /\p{Cc}/u;

/** The same rule as a JSON Schema pattern, for request schemas. */
export const NO_CONTROL_CHARACTERS_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';

/** A name: single-line text with something besides spaces (a lookahead before the same rule). */
export const NAME_PATTERN = `^(?=.*\\S)${NO_CONTROL_CHARACTERS_PATTERN.slice(1)}`;

export const hasControlCharacter = (value: string) => CONTROL_CHARACTER.test(value);

/** Whether the string holds a NUL, which PostgreSQL refuses in text: the whole statement fails (22021). */
export const hasNul = (value: string) => value.includes('\u0000');

const characterCount = (value: string) => {
  let count = 0;
  for (const _ of value) count++;
  return count;
};

/** Why `value` is not acceptable single-line text of at most `maxLength` characters, or null. */
export function textProblem(field: string, value: string, maxLength: number): string | null {
  if (hasControlCharacter(value)) return `${field} must not contain control characters (such as NUL, tab or line breaks).`;
  if (value.length > maxLength && characterCount(value) > maxLength) return `${field} must be at most ${maxLength} characters.`;
  return null;
}
