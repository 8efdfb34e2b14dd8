/**
 * The grammar of filters (`col=op.value`), logic trees (`or=(…)`, `not.and=(…)`) and filter keys.
 * PostgREST's value syntaxes: a top-level value runs to the end of the parameter, a tree value to
 * the next `,` or `)` unless quoted or a `{…}` literal, and an in-list is its own list syntax.
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import { Cursor, readClosedQuote, readField, readIdentifier, readJsonPath, readName } from './cursor.ts';
import {
  type Condition, type FieldRef, type Filter, type FtsOperator, type IsValue, type LogicTree, type Operation,
  type QuantifiableOperator, type SimpleOperator,
  ftsOperators, isValues, quantifiableOperators, simpleOperators,
} from './syntax.ts';

const isOneOf = <T extends string>(values: readonly T[], word: string): word is T => (values as readonly string[]).includes(word);

/** Operators are lower-case words; the set is fixed, so anything else is a parse error. */
function readOperation(c: Cursor, inTree: boolean): Operation {
  const start = c.pos;
  while (/[a-z]/.test(c.peek())) c.pos++;
  const op = c.text.slice(start, c.pos);
  const readValue = () => (inTree ? readTreeValue(c) : c.rest());
  if (op === 'in') {
    c.expect('.');
    return { kind: 'in', values: readList(c) };
  }
  if (op === 'is') {
    c.expect('.');
    const valueStart = c.pos;
    // In a tree, spaces before the `,` or `)` that ends the keyword are skipped (PostgREST's `lexeme`).
    const value = (inTree ? readValue().replace(/[ \t]+$/, '') : readValue()).toLowerCase();
    if (!isOneOf<IsValue>(isValues, value)) {
      c.pos = valueStart;
      return c.fail('null or not_null or true or false or unknown');
    }
    return { kind: 'is', value };
  }
  if (isOneOf<FtsOperator>(ftsOperators, op)) {
    let language: string | null = null;
    if (c.take('(')) {
      language = readIdentifier(c, 'a text search configuration name');
      c.expect(')');
    }
    c.expect('.');
    return { kind: 'fts', op, language, value: readValue() };
  }
  if (isOneOf<QuantifiableOperator>(quantifiableOperators, op)) {
    let quantifier: 'any' | 'all' | null = null;
    if (c.take('(any)')) quantifier = 'any';
    else if (c.take('(all)')) quantifier = 'all';
    c.expect('.');
    return { kind: 'compare', op, quantifier, value: readValue() };
  }
  if (isOneOf<SimpleOperator>(simpleOperators, op)) {
    c.expect('.');
    return { kind: 'compare', op, quantifier: null, value: readValue() };
  }
  c.pos = start;
  return c.fail('"not" or operator (eq, gt, ...)');
}

/** Raw text up to the next `,` or `)`: an element of an in-list or a tree's value, unquoted. */
function readUnquoted(c: Cursor): string {
  const start = c.pos;
  while (!c.done && c.peek() !== ',' && c.peek() !== ')') c.pos++;
  return c.text.slice(start, c.pos);
}

/**
 * A quoted element or value, when a closing quote ends it (a `,` or `)` follows); otherwise
 * null with the cursor left where it was: PostgREST then reads the element as unquoted text,
 * quotes included (`pListElement`, `pLogicSingleVal`), also when the quote never closes
 * (postgrest-js quotes only values holding `,()`, so `.in('name', ['"Bob', 'Zoë'])` sends `in.("Bob,Zoë)`).
 */
function readQuotedElement(c: Cursor): string | null {
  const start = c.pos;
  const value = readClosedQuote(c);
  if (value !== null && (c.done || c.peek() === ',' || c.peek() === ')')) return value;
  c.pos = start;
  return null;
}

/**
 * `in.(a,"b,c",d)`: spaces and tabs around the parentheses are skipped, everything else is data
 * (PostgREST's `lexeme`).
 */
function readList(c: Cursor): string[] {
  c.skipSpaces();
  c.expect('(');
  c.skipSpaces();
  const values: string[] = [];
  if (c.take(')')) {
    c.skipSpaces();
    return values;
  }
  for (;;) {
    values.push((c.peek() === '"' ? readQuotedElement(c) : null) ?? readUnquoted(c));
    if (values.length > LIMITS.maxListValues) {
      throw apiError('QUERY_TOO_COMPLEX', `an in-list holds more than ${LIMITS.maxListValues} values`);
    }
    if (c.take(')')) break;
    c.expect(',');
  }
  c.skipSpaces();
  // PostgREST reads `in.("")` as the empty list.
  return values.length === 1 && values[0] === '' ? [] : values;
}

/** An array literal in a tree's value, `{…}` with no brace inside: kept whole, commas and all. */
const ARRAY_LITERAL = /\{[^{}]*\}/y;

/**
 * A value inside `or=(…)`: quoted, a `{…}` literal kept whole, or up to the next `,` or `)`; a
 * quote or brace that does not close reads as unquoted text, as in PostgREST.
 */
function readTreeValue(c: Cursor): string {
  const quoted = c.peek() === '"' ? readQuotedElement(c) : null;
  if (quoted !== null) return quoted;
  ARRAY_LITERAL.lastIndex = c.pos;
  const literal = ARRAY_LITERAL.exec(c.text);
  if (literal) {
    c.pos += literal[0].length;
    return literal[0];
  }
  return readUnquoted(c);
}

function readFilterOperation(c: Cursor, inTree: boolean): { negated: boolean; operation: Operation } {
  const negated = c.take('not.');
  return { negated, operation: readOperation(c, inTree) };
}

function readTreeItems(c: Cursor, depth: number): Condition[] {
  if (depth > LIMITS.maxTreeDepth) {
    throw apiError('QUERY_TOO_COMPLEX', `logic trees nest deeper than ${LIMITS.maxTreeDepth} levels`);
  }
  c.skipSpaces();
  c.expect('(');
  const items: Condition[] = [];
  for (;;) {
    c.skipSpaces();
    items.push(readTreeItem(c, depth));
    c.skipSpaces();
    if (c.take(')')) {
      c.skipSpaces();
      return items;
    }
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
  // The spec writes an OR group's item `<col>=cs.{<uuid>}` (docs/decisions.md, Resources and
  // reads), so `=` joins a column to its operator here as `.` does; a name never holds `=`.
  if (!c.take('=')) c.expect('.');
  return { kind: 'filter', field, ...readFilterOperation(c, true) };
}

export function parseFilter(field: FieldRef, value: string): Filter {
  const c = new Cursor(value, 'filter');
  const filter: Filter = { kind: 'filter', field, ...readFilterOperation(c, false) };
  // Only an in-list ends before the value does: PostgREST drops what follows its `)`.
  c.expectEnd();
  return filter;
}

export function parseLogicTree(op: 'and' | 'or', negated: boolean, value: string): LogicTree {
  const prefix = `${negated ? 'not.' : ''}${op}`;
  const c = new Cursor(value, 'logic tree', prefix + value, prefix.length);
  const children = readTreeItems(c, 1);
  c.expectEnd();
  return { kind: 'tree', op, negated, children };
}

/** Field names of a filter key: `a.b.col` is column `col` of embed path `a.b`. */
export function parseFilterKey(key: string): { path: string[]; field: FieldRef } {
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
