/**
 * The nesting guard: a JSON path, a JSON value or a full-text query nested deeper than
 * LIMITS.maxNesting is refused with 400 QUERY_TOO_COMPLEX before any SQL runs. PostgreSQL reads
 * them recursively or on a small stack, and fails the same request every time with an error that
 * would be a 500: its tsquery parser holds 32 pending operators (`!` thirty times after
 * `a | b & c <->`: "tsquery stack too small", XX000), and the embedded store's stack gives out at
 * about 1,800 JSON path steps or 7,000 nested brackets, failing the statement with "bad buffer ID".
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { Column } from '../resources/registry.ts';
import type { FieldRef, FtsOperator, Operation } from './syntax.ts';

/** The deepest nesting of JSON arrays and objects in `text`; brackets inside JSON strings do not count. */
export function jsonNesting(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '[' || ch === '{') deepest = Math.max(deepest, ++depth);
    else if (ch === ']' || ch === '}') depth--;
  }
  return deepest;
}

/**
 * The deepest nesting of a full-text query: open parentheses plus negations in a row, each of
 * which nests its operand once more (`!!a` is `!(!a)`). `to_tsquery` negates with `!`;
 * `websearch_to_tsquery` with a `-` that starts a word, and has no parentheses. The others read
 * no operators.
 */
export function searchNesting(op: FtsOperator, query: string): number {
  if (op === 'plfts' || op === 'phfts') return 0;
  const negation = op === 'fts' ? '!' : '-';
  let depth = 0;
  let run = 0;
  let deepest = 0;
  for (let i = 0; i < query.length; i++) {
    const ch = query[i];
    if (ch === negation && (op === 'fts' || run > 0 || i === 0 || /\s/.test(query[i - 1]))) run++;
    else if (op === 'fts' && ch === '(') depth++;
    else if (op === 'fts' && ch === ')') depth = Math.max(0, depth - 1);
    else if (!/\s/.test(ch)) run = 0;
    deepest = Math.max(deepest, depth + run);
  }
  return deepest;
}

const tooDeep = (what: string) => apiError('QUERY_TOO_COMPLEX', `${what} nests deeper than ${LIMITS.maxNesting} levels`);

/** Throws 400 QUERY_TOO_COMPLEX for a JSON path of more than LIMITS.maxNesting steps. */
export function checkFieldNesting(field: FieldRef): void {
  if (field.jsonPath.length > LIMITS.maxNesting) throw tooDeep(`the JSON path of ${field.name}`);
}

/**
 * Throws 400 QUERY_TOO_COMPLEX for an operation whose value PostgreSQL would read nested too
 * deep: a full-text query, or a value compared with JSON (a jsonb column, or a path ending in `->`).
 */
export function checkValueNesting(column: Column, field: FieldRef, operation: Operation): void {
  const last = field.jsonPath[field.jsonPath.length - 1];
  const comparesJson = last ? last.arrow === '->' : column.type === 'jsonb';
  switch (operation.kind) {
    case 'fts':
      if (searchNesting(operation.op, operation.value) > LIMITS.maxNesting) throw tooDeep(`the ${operation.op} query`);
      return;
    case 'compare':
      if (comparesJson && jsonNesting(operation.value) > LIMITS.maxNesting) throw tooDeep('a JSON value');
      return;
    case 'in':
      if (comparesJson && operation.values.some((value) => jsonNesting(value) > LIMITS.maxNesting)) throw tooDeep('a JSON value');
      return;
    case 'is':
      return;
  }
}
