/**
 * Reading a SIS export: one CSV file per resource, its columns mapped to the resource's write
 * fields (src/resources/write-shapes.ts), each cell turned into the JSON value its field's kind
 * takes. Values are not validated here: the service does that row by row and says why in the
 * row's code, so the reject report carries the service's own reasons.
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'csv-parse/sync';
import { type FieldKind, WRITE_SHAPES, type WritableResource, type WriteField, fieldNames } from '../../src/resources/write-shapes.ts';
import { SyncInputError } from './errors.ts';

/** Write field → CSV column header. */
export type ColumnMapping = Readonly<Record<string, string | undefined>>;

export interface InputRow {
  /** The line of the file the record starts on (the header is line 1). */
  readonly line: number;
  /** The record as read, column by column. */
  readonly fields: Readonly<Record<string, string>>;
  /** The JSON row sent to the service. */
  readonly body: Readonly<Record<string, unknown>>;
}

export interface InputFile {
  readonly resource: WritableResource;
  readonly path: string;
  readonly header: readonly string[];
  readonly rows: readonly InputRow[];
  /** Columns named loosely like a field they do not feed (resolveColumns), to tell the user. */
  readonly unsent: readonly string[];
}

/** The separator of a list field's entries in one cell (resume_template_names). */
const LIST_SEPARATOR = ';';

const TRUE_WORDS = new Set(['true', 't', 'yes', 'y', '1']);
const FALSE_WORDS = new Set(['false', 'f', 'no', 'n', '0']);

/** A cell's JSON value for a field of this kind; a cell the kind cannot read is sent as text, for the service to refuse. */
const CONVERT: Record<FieldKind, (cell: string) => unknown> = {
  text: (cell) => cell,
  email: (cell) => cell,
  phone: (cell) => cell,
  date: (cell) => cell,
  enum: (cell) => cell,
  boolean: (cell) => {
    const word = cell.toLowerCase();
    return TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : cell;
  },
  integer: (cell) => (/^[+-]?\d+$/.test(cell) ? Number(cell) : cell),
  'text[]': (cell) => cell.split(LIST_SEPARATOR).map((entry) => entry.trim()).filter(Boolean),
};

/** The field a column header names loosely: the same but for case and the `_`, `-` or spaces between its words (`Cohort Name`). */
const fieldNamed = (header: string) => header.toLowerCase().replace(/[\s_-]+/g, '_');

interface Columns {
  /** Field → the column that feeds it. */
  readonly fed: Map<string, string>;
  /** Columns named loosely like a field they do not feed, told as the run starts. */
  readonly unsent: readonly string[];
}

/**
 * Which column feeds each field: the mapping's, else the column named like the field, else, for a
 * field the mode needs, the one column named so loosely. A mapped column the file lacks, two
 * loose names for a needed field, or a needed field with no column, is an input error. A column
 * loosely named like a field it does not feed is told, not sent: an exact match only left a
 * PATCH's `Phone` column unsent while every row came back unchanged, and sending it would have
 * changed what existing jobs write (a `Graduation Date` column left out on purpose).
 */
function resolveColumns(resource: WritableResource, path: string, header: readonly string[], mapping: ColumnMapping, needed: readonly string[]): Columns {
  const shape = WRITE_SHAPES[resource];
  const fed = new Map<string, string>();
  const unsent: string[] = [];
  for (const field of fieldNames(shape)) {
    const mapped = mapping[field];
    if (mapped !== undefined && !header.includes(mapped)) {
      throw new SyncInputError(`${path}: the column "${mapped}" mapped to ${resource}.${field} is not in the file's header (${header.join(', ')}).`);
    }
    // A column the mapping gives to a field feeds that one alone.
    const loose = header.filter((column) => column !== field && fieldNamed(column) === field && !Object.values(mapping).includes(column));
    const exact = mapped ?? (header.includes(field) ? field : undefined);
    if (exact === undefined && needed.includes(field) && loose.length > 1) {
      throw new SyncInputError(`${path}: the columns ${loose.map((column) => `"${column}"`).join(' and ')} both name ${resource}.${field}; `
        + `map the one to send (--map ${resource}.${field}=<column>).`);
    }
    const column = exact ?? (needed.includes(field) ? loose[0] : undefined);
    if (column !== undefined) fed.set(field, column);
    for (const other of loose.filter((c) => c !== column)) {
      unsent.push(`${path}: the column "${other}" is named like ${resource}.${field} but does not feed it, so it is not sent; `
        + `to send it, map it (--map ${resource}.${field}=${other}).`);
    }
  }
  const missing = needed.filter((field) => !fed.has(field));
  if (missing.length > 0) {
    throw new SyncInputError(`${path}: no column for ${missing.map((f) => `${resource}.${f}`).join(', ')}, which this mode needs; `
      + `name a column after the field or map one (--map ${resource}.${missing[0]}=<column>).`);
  }
  return { fed, unsent };
}

export interface ReadOptions {
  readonly mapping: ColumnMapping;
  /** Fields every row must have a column for (the key; on create, the create fields). */
  readonly needed: readonly string[];
  /** An empty cell of a nullable field is sent as null (clearing it); otherwise it is left out (left untouched). */
  readonly emptyAsNull: boolean;
}

/** Keeps a byte order mark, as reading 'utf8' did, and refuses bytes that are not UTF-8. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export async function readInputFile(resource: WritableResource, path: string, options: ReadOptions): Promise<InputFile> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw new SyncInputError(`${path}: cannot read the ${resource} file (${(error as NodeJS.ErrnoException).code ?? String(error)}).`);
  }
  let text: string;
  try {
    // Strictly: a Latin-1 or Windows-1252 export read as UTF-8 would send U+FFFD for every accent.
    text = UTF8.decode(bytes);
  } catch {
    throw new SyncInputError(`${path}: the ${resource} file is not UTF-8 text; export it as "CSV UTF-8".`);
  }
  // csv-parse counts a CRLF inside a quoted field as two lines; with LF alone its line numbers are exact.
  const [headerRecord, ...records] = parseCsv(path, text.replaceAll('\r\n', '\n'));
  if (!headerRecord) throw new SyncInputError(`${path}: the file is empty; it needs a header line.`);
  const header = headerRecord.record;
  const repeated = header.find((name, i) => header.indexOf(name) !== i);
  if (repeated !== undefined) throw new SyncInputError(`${path}: the header names the column "${repeated}" twice.`);
  const { fed: columns, unsent } = resolveColumns(resource, path, header, options.mapping, options.needed);
  const fieldsOf: Readonly<Record<string, WriteField>> = WRITE_SHAPES[resource].fields;
  const rows = records.map(({ record, info }): InputRow => {
    const fields = Object.fromEntries(header.map((name, i) => [name, record[i]]));
    const body: Record<string, unknown> = {};
    for (const [field, column] of columns) {
      const cell = fields[column];
      const { kind, nullable } = fieldsOf[field];
      if (cell !== '') body[field] = CONVERT[kind](cell);
      else if (options.emptyAsNull && nullable) body[field] = null;
    }
    // info.lines is the record's last line; a quoted field's line breaks put its first line earlier.
    const breaks = record.reduce((n, cell) => n + (cell.match(/\n/g)?.length ?? 0), 0);
    return { line: info.lines - breaks, fields, body };
  });
  return { resource, path, header, rows, unsent };
}

interface ParsedRecord {
  record: string[];
  info: { lines: number };
}

/** Every record, the header first; a malformed file (an unclosed quote, a line with too many or too few cells) is an input error. */
function parseCsv(path: string, text: string): ParsedRecord[] {
  try {
    // A record of empty cells alone is skipped like an empty line: Excel writes `,,,,` for a formatted empty row.
    return parse(text, { info: true, bom: true, trim: true, skip_empty_lines: true, skip_records_with_empty_values: true }) as unknown as ParsedRecord[];
  } catch (error) {
    throw new SyncInputError(`${path}: ${(error as Error).message}.`);
  }
}
