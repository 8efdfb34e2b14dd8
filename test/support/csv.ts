/**
 * Reading the service's CSV back with a real parser (csv-parse) and holding it against the JSON
 * read of the same request: RFC 4180 as the service writes it, records ending in CRLF, an
 * unquoted empty field NULL and `""` the empty string; strings raw, any other value its JSON.
 */
import assert from 'node:assert/strict';
import { parse } from 'csv-parse/sync';

export type Field = string | null;

/** Records end in CRLF only, so a bare CR or LF inside a field must be quoted or the records break. */
export function parseCsv(text: string): Field[][] {
  return parse(text, {
    record_delimiter: '\r\n',
    cast: (value, context) => (value === '' && !context.quoting ? null : value),
  }) as Field[][];
}

/** The CSV field the JSON value must come back as: strings raw, NULL empty, anything else its JSON. */
function assertFieldMatches(field: Field, value: unknown, where: string): void {
  if (value === null) assert.equal(field, null, where);
  else if (typeof value === 'string') assert.equal(field, value, where);
  else assert.deepEqual(JSON.parse(field!), value, where);
}

/** Every record of `csv` against the JSON rows; the header is `keys`, in select order. */
export function assertCsvEqualsJson(csv: string, rows: readonly Record<string, unknown>[], keys: readonly string[]): void {
  assert.ok(csv.endsWith('\r\n'), 'every record ends with CRLF');
  const [header, ...records] = parseCsv(csv);
  assert.deepEqual(header, keys);
  assert.equal(records.length, rows.length);
  records.forEach((record, r) => keys.forEach((key, k) => assertFieldMatches(record[k], rows[r][key], `row ${r}, ${key}`)));
}
