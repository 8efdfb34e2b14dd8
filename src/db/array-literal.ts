/**
 * A PostgreSQL array literal with every element quoted, so that commas, braces, quotes,
 * backslashes and the word NULL inside values stay data. `null` elements become NULL.
 */
export function arrayLiteral(values: readonly (string | null)[]): string {
  const elements = values.map((v) => (v === null ? 'NULL' : `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`));
  return `{${elements.join(',')}}`;
}
