/**
 * The service's one timestamp format, on /v1 and /admin/v1 alike: RFC 3339 with an explicit
 * offset, e.g. `2026-11-22T19:09:26.724+00:00`. It is PostgreSQL's JSON rendering of a
 * timestamptz in the session's TimeZone, which src/db/database.ts sets to UTC in every
 * transaction. The reads get it from json_build_object (src/query/sql.ts); a statement that
 * returns a timestamp as a column of its own takes the same rendering through this.
 */
export const timestampJson = (expression: string): string => `(to_json(${expression}) #>> '{}')`;

/**
 * The text that rendering gives in UTC: seconds carry up to six fractional digits, trailing
 * zeros dropped, and the offset is `+00:00`.
 */
const RENDERED_UTC = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,6})?\+00:00$/;

/**
 * Whether the text is a timestamp as the service renders it: the UTC form, an instant that
 * exists (no 30 February, no 24:00, no second 60) and a year PostgreSQL has (no year 0), so
 * PostgreSQL reads it back without an error.
 */
export function isRenderedTimestamp(text: string): boolean {
  const match = RENDERED_UTC.exec(text);
  if (!match) return false;
  const millis = Date.parse(`${match[1]}Z`);
  // A date that does not exist is rolled over by Date (30 February becomes 2 March) or refused.
  return !Number.isNaN(millis) && new Date(millis).toISOString().startsWith(match[1]) && Number(match[1].slice(0, 4)) >= 1;
}
