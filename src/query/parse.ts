/**
 * Parse: query string and headers → syntax tree. PostgREST's grammar, including its four value
 * syntaxes (top-level literal, in-list, logic-tree value, PostgreSQL array/range literal passed
 * through). Nothing here knows the resources; the planner checks names against the registry.
 */
import { unescape } from 'node:querystring';
import { type ApiError, apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import {
  type Condition, type CountPreference, type EmbedReference, type FieldRef, type Filter, type FtsOperator,
  type IsValue, type JsonStep, type LogicTree, type Operation, type OrderTerm, type QuantifiableOperator,
  type ReadSyntax, type SelectItem, type SimpleOperator,
  ftsOperators, isValues, quantifiableOperators, simpleOperators,
} from './syntax.ts';

const MODIFIERS = new Set(['order', 'limit', 'offset', 'and', 'or']);
const IGNORED_ON_READ = new Set(['columns', 'on_conflict']);

const parseError = (what: string, raw: string, position: number, details: string): ApiError =>
  apiError('PGRST100', what, raw, position, details);

/** A small reader over one parameter's text; positions feed the error messages. */
class Cursor {
  pos = 0;
  constructor(readonly text: string, readonly what: string, readonly shown: string = text, readonly shownOffset = 0) {}

  get done(): boolean {
    return this.pos >= this.text.length;
  }
  peek(ahead = 0): string {
    return this.text[this.pos + ahead] ?? '';
  }
  startsWith(s: string): boolean {
    return this.text.startsWith(s, this.pos);
  }
  take(s: string): boolean {
    if (!this.startsWith(s)) return false;
    this.pos += s.length;
    return true;
  }
  expect(s: string): void {
    if (!this.take(s)) this.fail(`"${s}"`);
  }
  skipSpaces(): void {
    while (this.peek() === ' ') this.pos++;
  }
  rest(): string {
    const value = this.text.slice(this.pos);
    this.pos = this.text.length;
    return value;
  }
  fail(expecting: string): never {
    const found = this.done ? 'end of input' : `"${this.peek()}"`;
    throw parseError(this.what, this.shown, this.pos + this.shownOffset, `unexpected ${found} expecting ${expecting}`);
  }
  expectEnd(): void {
    if (!this.done) this.fail('end of input');
  }
}

const identifierChar = /[\p{L}\p{N}_$ ]/u;

/** A field name: identifier characters joined by single dashes, or a double-quoted name. */
function readName(c: Cursor): string {
  if (c.peek() === '"') return readQuoted(c);
  const start = c.pos;
  while (!c.done) {
    const ch = c.peek();
    if (identifierChar.test(ch)) c.pos++;
    else if (ch === '-' && c.peek(1) !== '>' && c.pos > start) c.pos++;
    else break;
  }
  const name = c.text.slice(start, c.pos).trim();
  if (!name) {
    c.pos = start;
    c.fail('field name');
  }
  return name;
}

/** `"…"` with `\x` meaning x for any character. */
function readQuoted(c: Cursor): string {
  c.expect('"');
  let value = '';
  for (;;) {
    if (c.done) c.fail('closing quote');
    const ch = c.peek();
    c.pos++;
    if (ch === '"') return value;
    if (ch === '\\') {
      if (c.done) c.fail('escaped character');
      value += c.peek();
      c.pos++;
    } else value += ch;
  }
}

const jsonKeyStop = new Set(['(', ')', ':', '.', ',', '>']);

function readJsonPath(c: Cursor): JsonStep[] {
  const steps: JsonStep[] = [];
  while (c.startsWith('->')) {
    const arrow = c.take('->>') ? '->>' : (c.take('->'), '->');
    let key: string;
    if (c.peek() === '"') key = readQuoted(c);
    else {
      const start = c.pos;
      while (!c.done && !jsonKeyStop.has(c.peek()) && !(c.peek() === '-' && c.peek(1) === '>' && c.pos > start)) c.pos++;
      key = c.text.slice(start, c.pos);
      if (!key) c.fail('JSON key or array index');
    }
    steps.push({ arrow, key, isIndex: /^-?\d+$/.test(key) });
  }
  return steps;
}

function readField(c: Cursor): FieldRef {
  const name = readName(c);
  return { name, jsonPath: readJsonPath(c) };
}

/** Operators are lower-case words; the set is fixed, so anything else is a parse error. */
function readOperation(c: Cursor, inTree: boolean): Operation {
  const start = c.pos;
  while (/[a-z]/.test(c.peek())) c.pos++;
  const op = c.text.slice(start, c.pos);
  if (op === 'in') {
    c.expect('.');
    return { kind: 'in', values: readList(c) };
  }
  if (op === 'is') {
    c.expect('.');
    const valueStart = c.pos;
    const raw = inTree ? readTreeValue(c) : c.rest();
    const value = raw.toLowerCase() as IsValue;
    if (!(isValues as readonly string[]).includes(value)) {
      c.pos = valueStart;
      c.fail('null or not_null or true or false or unknown');
    }
    return { kind: 'is', value };
  }
  if ((ftsOperators as readonly string[]).includes(op)) {
    let language: string | null = null;
    if (c.take('(')) {
      const langStart = c.pos;
      while (!c.done && c.peek() !== ')') c.pos++;
      language = c.text.slice(langStart, c.pos);
      c.expect(')');
    }
    c.expect('.');
    return { kind: 'fts', op: op as FtsOperator, language, value: inTree ? readTreeValue(c) : c.rest() };
  }
  if ((quantifiableOperators as readonly string[]).includes(op)) {
    let quantifier: 'any' | 'all' | null = null;
    if (c.take('(any)')) quantifier = 'any';
    else if (c.take('(all)')) quantifier = 'all';
    c.expect('.');
    return { kind: 'compare', op: op as QuantifiableOperator, quantifier, value: inTree ? readTreeValue(c) : c.rest() };
  }
  if ((simpleOperators as readonly string[]).includes(op)) {
    c.expect('.');
    return { kind: 'compare', op: op as SimpleOperator, quantifier: null, value: inTree ? readTreeValue(c) : c.rest() };
  }
  c.pos = start;
  return c.fail('"not" or operator (eq, gt, ...)');
}

/** `in.(a,"b,c",d)`: whitespace right after `(` is skipped, everything else is data. */
function readList(c: Cursor): string[] {
  c.expect('(');
  c.skipSpaces();
  const values: string[] = [];
  if (c.take(')')) return values;
  for (;;) {
    if (c.peek() === '"') {
      values.push(readQuoted(c));
      if (c.peek() !== ',' && c.peek() !== ')') c.fail('"," or ")"');
    } else {
      const start = c.pos;
      while (!c.done && c.peek() !== ',' && c.peek() !== ')') c.pos++;
      values.push(c.text.slice(start, c.pos));
    }
    if (values.length > LIMITS.maxListValues) throw tooComplex(`an in-list holds more than ${LIMITS.maxListValues} values`);
    if (c.take(')')) break;
    c.expect(',');
  }
  // PostgREST reads `in.("")` as the empty list.
  return values.length === 1 && values[0] === '' ? [] : values;
}

/** A value inside `or=(…)`: quoted, a `{…}` literal kept whole, or up to the next `,` or `)`. */
function readTreeValue(c: Cursor): string {
  if (c.peek() === '"') {
    const value = readQuoted(c);
    if (c.peek() !== ',' && c.peek() !== ')') c.fail('"," or ")"');
    return value;
  }
  const start = c.pos;
  if (c.peek() === '{') {
    while (!c.done && c.peek() !== '}') c.pos++;
    c.expect('}');
    return c.text.slice(start, c.pos);
  }
  while (!c.done && c.peek() !== ',' && c.peek() !== ')') c.pos++;
  return c.text.slice(start, c.pos);
}

function readFilterOperation(c: Cursor, inTree: boolean): { negated: boolean; operation: Operation } {
  const negated = c.take('not.');
  return { negated, operation: readOperation(c, inTree) };
}

function readTreeItems(c: Cursor, depth: number): Condition[] {
  if (depth > LIMITS.maxTreeDepth) throw tooComplex(`logic trees nest deeper than ${LIMITS.maxTreeDepth} levels`);
  c.skipSpaces();
  c.expect('(');
  const items: Condition[] = [];
  for (;;) {
    c.skipSpaces();
    items.push(readTreeItem(c, depth));
    c.skipSpaces();
    if (c.take(')')) return items;
    c.expect(',');
  }
}

function readTreeItem(c: Cursor, depth: number): Condition {
  const start = c.pos;
  const negated = c.take('not.');
  for (const op of ['or', 'and'] as const) {
    if (c.startsWith(`${op}(`)) {
      c.pos += op.length;
      return { kind: 'tree', op, negated, children: readTreeItems(c, depth + 1) };
    }
  }
  c.pos = start;
  const field = readField(c);
  c.expect('.');
  return { kind: 'filter', field, ...readFilterOperation(c, true) };
}

export function parseFilter(field: FieldRef, value: string): Filter {
  const c = new Cursor(value, 'filter');
  return { kind: 'filter', field, ...readFilterOperation(c, false) };
}

export function parseLogicTree(op: 'and' | 'or', negated: boolean, value: string): LogicTree {
  const prefix = `${negated ? 'not.' : ''}${op}`;
  const c = new Cursor(value, 'logic tree', prefix + value, prefix.length);
  const children = readTreeItems(c, 1);
  c.expectEnd();
  return { kind: 'tree', op, negated, children };
}

function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === '(') depth++;
    else if (ch === ')') depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

const embeddingUnsupported = (name: string) => apiError('PGRST200', name);
const aggregatesUnsupported = () => apiError('PGRST123');

export function parseSelect(raw: string): SelectItem[] {
  if (raw.trim() === '') return [{ kind: 'star' }];
  const items: SelectItem[] = [];
  let offset = 0;
  for (const part of splitTopLevel(raw)) {
    const c = new Cursor(part, 'select parameter', raw, offset);
    offset += part.length + 1;
    c.skipSpaces();
    if (c.take('*')) {
      c.skipSpaces();
      c.expectEnd();
      items.push({ kind: 'star' });
      continue;
    }
    if (c.startsWith('...')) throw embeddingUnsupported(part.slice(3).split(/[(!]/)[0]);
    let alias: string | null = null;
    let field = readField(c);
    if (c.peek() === ':' && c.peek(1) !== ':' && field.jsonPath.length === 0) {
      c.pos++;
      alias = field.name;
      c.skipSpaces();
      field = readField(c);
    }
    if (c.peek() === '(' || c.peek() === '!') {
      if (field.name === 'count' && c.startsWith('()')) throw aggregatesUnsupported();
      throw embeddingUnsupported(field.name);
    }
    let cast: string | null = null;
    if (c.take('::')) {
      const start = c.pos;
      while (/[A-Za-z0-9_ $]/.test(c.peek())) c.pos++;
      cast = c.text.slice(start, c.pos).trim();
      if (!cast) c.fail('type name');
    }
    if (c.peek() === '.' && /^\.(sum|avg|count|max|min)\(\)/.test(c.text.slice(c.pos))) throw aggregatesUnsupported();
    c.skipSpaces();
    c.expectEnd();
    items.push({ kind: 'field', alias, field, cast });
  }
  if (items.length > LIMITS.maxSelectItems) throw tooComplex(`select names more than ${LIMITS.maxSelectItems} items`);
  return items;
}

export function parseOrder(raw: string): OrderTerm[] {
  const terms: OrderTerm[] = [];
  let offset = 0;
  for (const part of splitTopLevel(raw)) {
    const c = new Cursor(part, 'order', raw, offset);
    offset += part.length + 1;
    const field = readField(c);
    if (c.peek() === '(') throw notEmbedded(field.name, 'order');
    let direction: OrderTerm['direction'] = null;
    let nulls: OrderTerm['nulls'] = null;
    if (c.take('.asc')) direction = 'asc';
    else if (c.take('.desc')) direction = 'desc';
    if (c.take('.nullsfirst')) nulls = 'first';
    else if (c.take('.nullslast')) nulls = 'last';
    if (!c.done) c.fail(direction || nulls ? 'end of input' : '"asc", "desc", "nullsfirst" or "nullslast"');
    terms.push({ field, direction, nulls });
  }
  if (terms.length > LIMITS.maxOrderTerms) throw tooComplex(`order names more than ${LIMITS.maxOrderTerms} terms`);
  return terms;
}

function parseInteger(name: 'limit' | 'offset', raw: string): number {
  if (!/^-?\d+$/.test(raw.trim())) {
    throw parseError(`${name} parameter`, raw, 0, `unexpected "${raw.slice(0, 1)}" expecting an integer`);
  }
  return Number(raw.trim());
}

/** Field names of a filter key: `a.b.col` is column `col` of embed path `a.b`. */
function parseKeyPath(key: string): { path: string[]; field: FieldRef } {
  const c = new Cursor(key, 'tree path');
  const names: string[] = [readName(c)];
  while (c.peek() === '.') {
    c.pos++;
    names.push(readName(c));
  }
  const jsonPath = readJsonPath(c);
  if (!c.done) c.fail(c.startsWith('::') ? 'a filter without a cast (casts are not supported in filters)' : 'end of input');
  const name = names.pop()!;
  return { path: names, field: { name, jsonPath } };
}

export const notEmbedded = (name: string, parameter: string): ApiError => apiError('PGRST108', name, parameter);

export const tooComplex = (reason: string): ApiError => apiError('QUERY_TOO_COMPLEX', reason);

/** Decodes once: `+` is a space, percent-escapes are undone, a key without `=` is dropped. */
export function decodeQueryString(queryString: string): [string, string][] {
  if (queryString.length > LIMITS.maxQueryStringBytes) {
    throw apiError('URI_TOO_LONG');
  }
  const pairs: [string, string][] = [];
  for (const item of queryString.split('&')) {
    const eq = item.indexOf('=');
    if (eq < 0) continue;
    const decode = (s: string) => unescape(s.replace(/\+/g, ' '));
    pairs.push([decode(item.slice(0, eq)), decode(item.slice(eq + 1))]);
  }
  return pairs;
}

function parseRangeHeader(header: string | undefined): ReadSyntax['rangeHeader'] {
  const match = header === undefined ? null : /^(\d+)-(\d*)$/.exec(header.trim());
  if (!match) return null;
  return { first: Number(match[1]), last: match[2] === '' ? null : Number(match[2]) };
}

const countValues = new Set<CountPreference>(['exact', 'planned', 'estimated']);
const knownPreferences = /^(count=(exact|planned|estimated)|handling=(strict|lenient)|return=(minimal|headers-only|representation)|resolution=(merge-duplicates|ignore-duplicates)|missing=(default|null)|tx=(commit|rollback)|timezone=.+|max-affected=\d+)$/;

/** RFC 7240 style: comma-separated tokens over any number of headers; the first of each name wins. */
function parsePrefer(headers: string | string[] | undefined) {
  const tokens = (Array.isArray(headers) ? headers : headers ? [headers] : [])
    .flatMap((h) => h.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  const first = new Map<string, string>();
  const invalid: string[] = [];
  for (const token of tokens) {
    if (!knownPreferences.test(token)) invalid.push(token);
    const [name, value = ''] = token.split('=', 2);
    if (!first.has(name)) first.set(name, value);
  }
  const count = countValues.has(first.get('count') as CountPreference) ? (first.get('count') as CountPreference) : null;
  const handling = first.get('handling');
  const strictHandling = handling === 'strict';
  if (strictHandling && invalid.length > 0) {
    throw apiError('PGRST122', invalid);
  }
  const preferenceApplied = [
    count ? `count=${count}` : null,
    handling === 'strict' || handling === 'lenient' ? `handling=${handling}` : null,
  ].filter((p): p is string => p !== null);
  return { count, strictHandling, preferenceApplied };
}

export interface ReadRequestInput {
  readonly queryString: string;
  readonly rangeHeader?: string;
  readonly preferHeader?: string | string[];
  /** The Range header applies to GET only, as in PostgREST. */
  readonly method: 'GET' | 'HEAD';
  readonly acceptHeader?: string;
}

export const SINGULAR_MEDIA_TYPE = 'application/vnd.pgrst.object+json';

export function parseReadRequest(input: ReadRequestInput): ReadSyntax {
  let select: SelectItem[] | null = null;
  let order: OrderTerm[] | null = null;
  let limit: number | null = null;
  let offset: number | null = null;
  const conditions: Condition[] = [];
  const embedReferences: EmbedReference[] = [];

  for (const [key, value] of decodeQueryString(input.queryString)) {
    if (key === 'select') {
      select ??= parseSelect(value);
      continue;
    }
    if (IGNORED_ON_READ.has(key)) continue;
    const segments = key.split('.');
    const last = segments[segments.length - 1];
    if (MODIFIERS.has(last)) {
      const negated = segments[segments.length - 2] === 'not' && (last === 'and' || last === 'or');
      const path = segments.slice(0, segments.length - (negated ? 2 : 1));
      if (path.length > 0) {
        embedReferences.push({ path, parameter: key });
        continue;
      }
      if (last === 'order') order ??= parseOrder(value);
      else if (last === 'limit') limit = parseInteger('limit', value);
      else if (last === 'offset') offset = parseInteger('offset', value);
      else conditions.push(parseLogicTree(last as 'and' | 'or', negated, value));
      continue;
    }
    const { path, field } = parseKeyPath(key);
    if (path.length > 0) {
      embedReferences.push({ path, parameter: key });
      continue;
    }
    conditions.push(parseFilter(field, value));
  }
  if (countConditions(conditions) > LIMITS.maxConditions) {
    throw tooComplex(`more than ${LIMITS.maxConditions} conditions`);
  }
  return {
    select: select ?? [{ kind: 'star' }],
    conditions,
    order: order ?? [],
    limit,
    offset,
    embedReferences,
    rangeHeader: input.method === 'GET' ? parseRangeHeader(input.rangeHeader) : null,
    ...parsePrefer(input.preferHeader),
    singular: (input.acceptHeader ?? '').split(',').some((t) => t.split(';')[0].trim().toLowerCase() === SINGULAR_MEDIA_TYPE),
  };
}

function countConditions(conditions: readonly Condition[]): number {
  return conditions.reduce((n, c) => n + (c.kind === 'tree' ? 1 + countConditions(c.children) : 1), 0);
}
