/**
 * The service's one timestamp format, on /v1 and /admin/v1 alike: RFC 3339 with an explicit
 * offset, e.g. `2026-11-22T19:09:26.724+00:00`. It is PostgreSQL's JSON rendering of a
 * timestamptz in the session's TimeZone, which src/db/database.ts sets to UTC in every
 * transaction. The reads get it from json_build_object (src/query/sql.ts); a statement that
 * returns a timestamp as a column of its own takes the same rendering through this.
 */
export const timestampJson = (expression: string): string => `(to_json(${expression}) #>> '{}')`;

/** The text that rendering gives: seconds carry up to six fractional digits, trailing zeros dropped. */
export const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}:\d{2}$/;
