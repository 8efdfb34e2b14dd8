/**
 * `npm run docs`: writes the generated sections of docs/api.md and README.md from the code that
 * holds each fact (the settings, the resource registry, the write shapes, the row codes, the error
 * catalogue, the limits, the headers CORS exposes). test/docs.test.ts fails when a section has drifted from what this writes.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../src/config.ts';
import { ERRORS, type ErrorCode } from '../src/errors.ts';
import { CORS_EXPOSED_HEADERS } from '../src/http/cors.ts';
import { LIMITS, LIMIT_DESCRIPTIONS, type Limit } from '../src/limits.ts';
import { resources } from '../src/resources/registry.ts';
import { WRITE_SHAPES, type WriteField } from '../src/resources/write-shapes.ts';
import { COHORT_ROW_CODES, STUDENT_ROW_CODES } from '../src/writes/row-codes.ts';

const API_DOC = fileURLToPath(new URL('../docs/api.md', import.meta.url));
const README = fileURLToPath(new URL('../README.md', import.meta.url));

const table = (header: readonly string[], rows: readonly (readonly string[])[]) =>
  [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');

function resourcesSection(): string {
  return table(['resource', 'columns (`?`: nullable)'], resources.map((r) => [
    `\`${r.name}\``,
    `${r.description} ${r.columns.map((c) => `\`${c.name}\` ${c.type}${c.nullable ? '?' : ''}`).join(', ')}`,
  ]));
}

function errorsSection(): string {
  const codes = Object.keys(ERRORS) as ErrorCode[];
  return table(['status', 'code', 'when'], codes
    .map((code) => [String(ERRORS[code].status), `\`${code}\``, ERRORS[code].when])
    .sort((a, b) => a[0].localeCompare(b[0]) || a[1].localeCompare(b[1])));
}

function limitsSection(): string {
  const names = Object.keys(LIMITS) as Limit[];
  return table(['limit', 'value', 'over it'], names.map((name) => {
    const { bounds, code, note } = LIMIT_DESCRIPTIONS[name];
    const answer = [code ? `${ERRORS[code].status} \`${code}\`` : null, note].filter(Boolean).join(', ');
    return [bounds, LIMITS[name].toLocaleString('en-US'), answer];
  }));
}

function fieldType(field: WriteField): string {
  const type = field.values ? field.values.map((v) => `\`${v}\``).join(' \\| ') : field.kind;
  const range = field.range ? `, ${field.range.min} to ${field.range.max}` : '';
  return `${type}${range}${field.maxLength ? `, ≤ ${field.maxLength} characters${field.kind === 'text[]' ? ' each' : ''}` : ''}`;
}

function writeFieldsSection(): string {
  return Object.entries(WRITE_SHAPES).map(([resource, shape]) => `**${resource}** (key: \`${shape.key}\`)\n\n${
    table(['field', 'type', 'on create', 'null clears it', 'meaning'], Object.entries(shape.fields).map(([name, f]: [string, WriteField]) => [
      `\`${name}\``, fieldType(f), f.requiredOnCreate ? 'required' : 'optional', f.nullable ? 'yes' : 'no', f.description ?? '',
    ]))}`).join('\n\n');
}

function rowCodesSection(): string {
  const rows = (codes: Readonly<Record<string, string>>) => Object.entries(codes).map(([code, when]) => [`\`${code}\``, when]);
  return `**students**\n\n${table(['code', 'when'], rows(STUDENT_ROW_CODES))}\n\n**cohorts**\n\n${table(['code', 'when'], rows(COHORT_ROW_CODES))}`;
}

function corsExposedHeadersSection(): string {
  return `${CORS_EXPOSED_HEADERS.map((name) => `\`${name}\``).join(', ')}.`;
}

function configurationSection(): string {
  return table(['variable', 'default', 'meaning'], Object.values(SETTINGS).map((s) => [`\`${s.env}\``, s.shown, s.meaning]));
}

/** Each document's generated sections. */
export const GENERATED: Readonly<Record<string, Readonly<Record<string, () => string>>>> = {
  [README]: { configuration: configurationSection },
  [API_DOC]: {
    resources: resourcesSection,
    'write-fields': writeFieldsSection,
    'row-codes': rowCodesSection,
    errors: errorsSection,
    limits: limitsSection,
    'cors-exposed-headers': corsExposedHeadersSection,
  },
};

/** The document at `path` (text `document`) with every generated section rewritten. */
export function renderGenerated(path: string, document: string): string {
  let out = document;
  for (const [name, render] of Object.entries(GENERATED[path])) {
    const begin = `<!-- BEGIN generated:${name} -->`;
    const end = `<!-- END generated:${name} -->`;
    const from = out.indexOf(begin);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`${path} lacks the markers of the generated section "${name}"`);
    out = `${out.slice(0, from + begin.length)}\n${render()}\n${out.slice(to)}`;
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const path of Object.keys(GENERATED)) await writeFile(path, renderGenerated(path, await readFile(path, 'utf8')));
}
