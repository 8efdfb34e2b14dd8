/**
 * What a sync leaves behind: the report (a CSV with a line per row to read: one the service
 * rejected, or applied with notes, where it came from, what the service said, and the row as it
 * was read) and the summary table.
 */
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import type { WritableResource } from '../../src/resources/write-shapes.ts';
import { ROW_STATUSES, type RowStatus } from '../../src/writes/batch.ts';
import type { RowResult } from './client.ts';
import type { InputFile, InputRow } from './csv-input.ts';
import { SyncInputError } from './errors.ts';

export interface Reported {
  readonly file: InputFile;
  readonly row: InputRow;
  readonly result: RowResult;
}

/** The report's own columns; the input file's columns follow them. */
const REPORT_COLUMNS = ['resource', 'file', 'line', 'status', 'code', 'message', 'notes'] as const;

/** An input column's title in the report: marked when it is also one of the report's own, so that neither hides the other. */
const inputTitle = (column: string) => ((REPORT_COLUMNS as readonly string[]).includes(column) ? `${column} (input)` : column);

/**
 * One CSV for both resources: the report's columns, then every column of the input files (those
 * two files share a column when they share a name); a row's notes one to a line of their cell.
 * Written even when nothing is to be reported, so that a report never describes an earlier run.
 */
export async function writeRejectReport(path: string, files: readonly InputFile[], reported: readonly Reported[]): Promise<void> {
  const inputColumns = [...new Set(files.flatMap((f) => f.header))];
  const records = reported.map(({ file, row, result }) => [
    file.resource, file.path, row.line, result.status, result.code ?? '', result.message ?? '', (result.notes ?? []).join('\n'),
    ...inputColumns.map((column) => row.fields[column] ?? ''),
  ]);
  await writeFile(path, stringify([[...REPORT_COLUMNS, ...inputColumns.map(inputTitle)], ...records]));
}

/**
 * Whether two paths name one file: through a link, or another spelling on a case-insensitive disk,
 * too. By their paths where the file system gives no inode numbers (0) or one is not there yet.
 */
async function sameFile(a: string, b: string): Promise<boolean> {
  try {
    const [first, second] = await Promise.all([stat(a, { bigint: true }), stat(b, { bigint: true })]);
    if (first.ino !== 0n && second.ino !== 0n) return first.dev === second.dev && first.ino === second.ino;
  } catch {
    // Either is not there yet: only its path can name the other.
  }
  return resolve(a) === resolve(b);
}

/**
 * Starts the report before the input is read: not over one of the sync's input files, its folder
 * made, and the file rewritten with the report's own columns alone. A sync that wrote rows and
 * could not report them would leave no account of its rejections, and a run stopped by bad input
 * left an earlier night's rejections in place, as if they were its own.
 */
export async function startRejectReport(path: string, inputs: readonly string[]): Promise<void> {
  if ((await Promise.all(inputs.map((input) => sameFile(input, path)))).includes(true)) throw new SyncInputError(`the reject report ${path} would overwrite an input file`);
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, stringify([[...REPORT_COLUMNS]]));
  } catch (error) {
    throw new SyncInputError(`cannot write the reject report ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

export type Tally = Record<RowStatus, number>;

export const emptyTally = (): Tally => Object.fromEntries(ROW_STATUSES.map((status) => [status, 0])) as Tally;

/** The summary: a line per resource synced, a column per outcome. */
export function summaryTable(tallies: ReadonlyMap<WritableResource, Tally>): string {
  const header = ['resource', ...ROW_STATUSES];
  const lines = [...tallies].map(([resource, tally]) => [resource, ...ROW_STATUSES.map((status) => String(tally[status]))]);
  const widths = header.map((title, i) => Math.max(title.length, ...lines.map((line) => line[i].length)));
  const format = (cells: readonly string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
  return [format(header), ...lines.map(format)].join('\n');
}
