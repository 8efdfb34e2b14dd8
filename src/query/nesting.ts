/**
 * The nesting guard: a JSON path, a JSON value or a full-text query nested deeper than
 * LIMITS.maxNesting is refused with 400 QUERY_TOO_COMPLEX before any SQL runs. PostgreSQL reads
 * them recursively or on a small stack, and fails the same request every time with an error that
 * would be a 500: its tsquery parser holds 32 pending operators (`!` thirty times after
 * `a | b & c <->`: "tsquery stack too small", XX000), and the embedded store's stack gives out at
 * about 1,800 JSON path steps or 7,000 nested brackets, failing the statement with "bad buffer ID".
 * A read whose full-text queries hold more than LIMITS.maxSearchTerms words in all is refused the
 * same way.
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';
import type { Column } from '../resources/registry.ts';
import { arrayLiteralElements } from './patterns.ts';
import type { Condition, FieldRef, FtsOperator, Operation } from './syntax.ts';

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
 * What websearch_to_tsquery passes over while it waits for an operand (PostgreSQL's
 * gettoken_query_websearch): spaces and the characters it reads as no operator of its own. They
 * neither end a run of negations nor make a following `-` part of a word.
 */
const WEBSEARCH_SKIPPED = /[\s!&|()<"]/;

/**
 * The deepest nesting of a full-text query: open parentheses plus negations in a row, each of
 * which nests its operand once more (`!!a` is `!(!a)`). `to_tsquery` negates with `!`, skipping
 * spaces between; `websearch_to_tsquery` with a `-` that does not continue a word (`x-y` is one
 * hyphenated word), skipping WEBSEARCH_SKIPPED between, and has no parentheses. The others read
 * no operators.
 */
export function searchNesting(op: FtsOperator, query: string): number {
  if (op === 'plfts' || op === 'phfts') return 0;
  let depth = 0;
  let run = 0;
  let inWord = false;
  let deepest = 0;
  for (const ch of query) {
    if (op === 'fts') {
      if (ch === '!') run++;
      else if (ch === '(') depth++;
      else if (ch === ')') depth = Math.max(0, depth - 1);
      else if (!/\s/.test(ch)) run = 0;
    } else if (WEBSEARCH_SKIPPED.test(ch)) inWord = false;
    else if (ch === '-' && !inWord) run++;
    else if (ch !== '-') {
      inWord = true;
      run = 0;
    }
    deepest = Math.max(deepest, depth + run);
  }
  return deepest;
}

const tooDeep = (what: string) => apiError('QUERY_TOO_COMPLEX', `${what} nests deeper than ${LIMITS.maxNesting} levels`);

/** Throws 400 QUERY_TOO_COMPLEX for a JSON path of more than LIMITS.maxNesting steps. */
export function checkFieldNesting(field: FieldRef): void {
  if (field.jsonPath.length > LIMITS.maxNesting) throw tooDeep(`the JSON path of ${field.name}`);
}

/** The values an operation compares with its field: with (any) or (all), each element of the array literal. */
function comparedValues(operation: Operation): readonly string[] {
  switch (operation.kind) {
    case 'compare':
      return operation.quantifier ? arrayLiteralElements(operation.value) : [operation.value];
    case 'in':
      return operation.values;
    case 'fts':
    case 'is':
      return [];
  }
}

/**
 * The words of a full-text query, counted as runs of letters and digits (a weight such as `:AB`
 * counts as one more). PostgreSQL's parser makes a hyphenated word into its parts and the whole
 * (`foo-bar`: three lexemes, counted two), so the store may match up to half again as many.
 */
export const searchTerms = (query: string): number => query.match(/[\p{L}\p{N}]+/gu)?.length ?? 0;

/** The words of every full-text query among the conditions, their trees' included. */
const conditionSearchTerms = (condition: Condition): number => {
  if (condition.kind === 'tree') return condition.children.reduce((sum, child) => sum + conditionSearchTerms(child), 0);
  return condition.operation.kind === 'fts' ? searchTerms(condition.operation.value) : 0;
};

/**
 * Throws 400 QUERY_TOO_COMPLEX for a read whose full-text queries hold more than
 * LIMITS.maxSearchTerms words in all: each is matched against every row's text, and a read may
 * hold up to LIMITS.maxConditions of them.
 */
export function checkSearchTerms(conditions: readonly Condition[]): void {
  const words = conditions.reduce((sum, condition) => sum + conditionSearchTerms(condition), 0);
  if (words > LIMITS.maxSearchTerms) throw apiError('QUERY_TOO_COMPLEX', `its full-text queries hold more than ${LIMITS.maxSearchTerms} words`);
}

/**
 * Throws 400 QUERY_TOO_COMPLEX for an operation whose value PostgreSQL would read nested too
 * deep: a full-text query, or a value compared with JSON (a jsonb column, or a path ending in `->`).
 */
export function checkValueNesting(column: Column, field: FieldRef, operation: Operation): void {
  if (operation.kind === 'fts' && searchNesting(operation.op, operation.value) > LIMITS.maxNesting) throw tooDeep(`the ${operation.op} query`);
  const last = field.jsonPath[field.jsonPath.length - 1];
  const comparesJson = last ? last.arrow === '->' : column.type === 'jsonb';
  if (comparesJson && comparedValues(operation).some((value) => jsonNesting(value) > LIMITS.maxNesting)) throw tooDeep('a JSON value');
}
