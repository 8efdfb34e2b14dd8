/**
 * The query string's parameters → their part of the syntax tree (PostgREST's QueryParams):
 * `select`, `order`, `limit`, `offset`, `and`/`or` trees and filters. Nothing here knows the
 * resources; the planner checks names against the registry.
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import { Cursor, readField, readName, readQuoted, splitTopLevel } from './cursor.ts';
import { parseFilter, parseFilterKey, parseLogicTree } from './filters.ts';
import type { Condition, EmbedReference, OrderTerm, ReadSyntax, SelectItem } from './syntax.ts';

export type QueryParams = Pick<ReadSyntax, 'select' | 'conditions' | 'order' | 'limit' | 'offset' | 'embedReferences'>;

const MODIFIERS = new Set(['order', 'limit', 'offset', 'and', 'or']);
const IGNORED_ON_READ = new Set(['columns', 'on_conflict']);

/**
 * What follows an embedding's name, as PostgREST's grammar takes it: at most two `!hint`s, then
 * its fields in balanced parentheses (a quoted name may hold one), to the end of the item. Only a
 * well-formed embedding is refused as one (PGRST200); anything else is a syntax error (PGRST100),
 * as in PostgREST.
 */
function readEmbeddingTail(c: Cursor): void {
  // A hint is a name, as a field's is (a foreign key `my-fk`, a quoted "x y").
  for (let hints = 0; hints < 2 && c.take('!'); hints++) readName(c);
  c.expect('(');
  for (let depth = 1; depth > 0;) {
    if (c.done) c.fail('")"');
    if (c.peek() === '"') readQuoted(c);
    else {
      if (c.peek() === '(') depth++;
      else if (c.peek() === ')') depth--;
      c.pos++;
    }
  }
  c.skipSpaces();
  c.expectEnd();
}

/** One `select` item after its optional `alias:`; embeddings and aggregates are refused by name. */
function readSelectField(c: Cursor): SelectItem {
  let alias: string | null = null;
  let field = readField(c);
  if (c.peek() === ':' && c.peek(1) !== ':' && field.jsonPath.length === 0) {
    c.pos++;
    alias = field.name;
    c.skipSpaces();
    field = readField(c);
  }
  if (c.peek() === '(' || c.peek() === '!') {
    if (field.name === 'count' && c.startsWith('()')) throw apiError('PGRST123');
    readEmbeddingTail(c);
    throw apiError('PGRST200', field.name);
  }
  let cast: string | null = null;
  if (c.take('::')) {
    const start = c.pos;
    while (/[A-Za-z0-9_ $]/.test(c.peek())) c.pos++;
    cast = c.text.slice(start, c.pos).trim();
    if (!cast) c.fail('type name');
  }
  if (c.peek() === '.' && /^\.(sum|avg|count|max|min)\(\)/.test(c.text.slice(c.pos))) throw apiError('PGRST123');
  c.skipSpaces();
  c.expectEnd();
  return { kind: 'field', alias, field, cast };
}

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
    } else if (c.startsWith('...')) {
      throw apiError('PGRST200', part.slice(3).split(/[(!]/)[0]);
    } else items.push(readSelectField(c));
  }
  if (items.length > LIMITS.maxSelectItems) throw apiError('QUERY_TOO_COMPLEX', `select names more than ${LIMITS.maxSelectItems} items`);
  return items;
}

export function parseOrder(raw: string): OrderTerm[] {
  const terms: OrderTerm[] = [];
  let offset = 0;
  for (const part of splitTopLevel(raw)) {
    const c = new Cursor(part, 'order', raw, offset);
    offset += part.length + 1;
    const field = readField(c);
    if (c.peek() === '(') throw apiError('PGRST108', field.name, 'order');
    let direction: OrderTerm['direction'] = null;
    let nulls: OrderTerm['nulls'] = null;
    if (c.take('.asc')) direction = 'asc';
    else if (c.take('.desc')) direction = 'desc';
    if (c.take('.nullsfirst')) nulls = 'first';
    else if (c.take('.nullslast')) nulls = 'last';
    if (!c.done) c.fail(direction || nulls ? 'end of input' : '"asc", "desc", "nullsfirst" or "nullslast"');
    terms.push({ field, direction, nulls });
  }
  if (terms.length > LIMITS.maxOrderTerms) throw apiError('QUERY_TOO_COMPLEX', `order names more than ${LIMITS.maxOrderTerms} terms`);
  return terms;
}

function parseInteger(name: 'limit' | 'offset', raw: string): bigint {
  if (!/^-?\d+$/.test(raw.trim())) {
    throw apiError('PGRST100', `${name} parameter`, raw, 0, `unexpected "${raw.slice(0, 1)}" expecting an integer`);
  }
  return BigInt(raw.trim());
}

function countConditions(conditions: readonly Condition[]): number {
  return conditions.reduce((n, c) => n + (c.kind === 'tree' ? 1 + countConditions(c.children) : 1), 0);
}

/**
 * The decoded parameters in order. The first `select` and `order` win; parameters addressed to an
 * embedded resource (`x.order`, `x.col=eq.1`) are kept aside for the planner to refuse.
 */
export function parseQueryParams(pairs: readonly (readonly [string, string])[]): QueryParams {
  let select: SelectItem[] | null = null;
  let order: OrderTerm[] | null = null;
  let limit: bigint | null = null;
  let offset: bigint | null = null;
  const conditions: Condition[] = [];
  const embedReferences: EmbedReference[] = [];
  for (const [key, value] of pairs) {
    if (key === 'select') select ??= parseSelect(value);
    if (key === 'select' || IGNORED_ON_READ.has(key)) continue;
    const segments = key.split('.');
    const last = segments[segments.length - 1];
    if (MODIFIERS.has(last)) {
      const negated = segments[segments.length - 2] === 'not' && (last === 'and' || last === 'or');
      const path = segments.slice(0, segments.length - (negated ? 2 : 1));
      if (path.length > 0) embedReferences.push({ path, parameter: key });
      else if (last === 'order') order ??= parseOrder(value);
      else if (last === 'limit') limit = parseInteger('limit', value);
      else if (last === 'offset') offset = parseInteger('offset', value);
      else if (last === 'and' || last === 'or') conditions.push(parseLogicTree(last, negated, value));
      continue;
    }
    const { path, field } = parseFilterKey(key);
    if (path.length > 0) embedReferences.push({ path, parameter: key });
    else conditions.push(parseFilter(field, value));
  }
  if (countConditions(conditions) > LIMITS.maxConditions) {
    throw apiError('QUERY_TOO_COMPLEX', `more than ${LIMITS.maxConditions} conditions`);
  }
  return { select: select ?? [{ kind: 'star' }], conditions, order: order ?? [], limit, offset, embedReferences };
}
