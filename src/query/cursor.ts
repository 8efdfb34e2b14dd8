/**
 * The reader every query-parameter grammar shares: a cursor over one parameter's text, and the
 * lexical pieces (names, quoted names, JSON paths) that filters, select and order all use.
 * Positions feed PGRST100's message, as PostgREST's parser reports them.
 */
import { apiError } from '../errors.ts';
import type { FieldRef, JsonStep } from './syntax.ts';

export class Cursor {
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
  /** PostgREST's `ws`: spaces and tabs. */
  skipSpaces(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
  }
  rest(): string {
    const value = this.text.slice(this.pos);
    this.pos = this.text.length;
    return value;
  }
  fail(expecting: string): never {
    const found = this.done ? 'end of input' : `"${this.peek()}"`;
    throw apiError('PGRST100', this.what, this.shown, this.pos + this.shownOffset, `unexpected ${found} expecting ${expecting}`);
  }
  expectEnd(): void {
    if (!this.done) this.fail('end of input');
  }
}

const identifierChar = /[\p{L}\p{N}_$ ]/u;

/** A name PostgREST's grammar reads as an identifier: letters, digits, `_`, `$` and spaces (a text search configuration's, say). */
export function readIdentifier(c: Cursor, what: string): string {
  const start = c.pos;
  while (!c.done && identifierChar.test(c.peek())) c.pos++;
  const name = c.text.slice(start, c.pos).trim();
  if (!name) {
    c.pos = start;
    c.fail(what);
  }
  return name;
}

/** A field name: identifier characters joined by single dashes, or a double-quoted name. */
export function readName(c: Cursor): string {
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
export function readQuoted(c: Cursor): string {
  const value = readClosedQuote(c);
  if (value !== null) return value;
  c.pos = c.text.length;
  return c.fail('closing quote');
}

/** readQuoted's `"…"`, or null with the cursor where it was when no closing quote ends it. */
export function readClosedQuote(c: Cursor): string | null {
  const start = c.pos;
  c.expect('"');
  let value = '';
  while (!c.done) {
    const ch = c.peek();
    c.pos++;
    if (ch === '"') return value;
    if (ch === '\\') {
      if (c.done) break;
      value += c.peek();
      c.pos++;
    } else value += ch;
  }
  c.pos = start;
  return null;
}

/** What ends an unquoted JSON key; `=` too, which joins a tree's item to its operator (`skills->>0=eq.Python`). */
const jsonKeyStop = new Set(['(', ')', ':', '.', ',', '>', '=']);

export function readJsonPath(c: Cursor): JsonStep[] {
  const steps: JsonStep[] = [];
  while (c.startsWith('->')) {
    const arrow = c.take('->>') ? '->>' : (c.take('->'), '->');
    // A quoted key is a key even when it is digits (`->"0"`), as in PostgREST.
    const quoted = c.peek() === '"';
    let key: string;
    if (quoted) key = readQuoted(c);
    else {
      const start = c.pos;
      while (!c.done && !jsonKeyStop.has(c.peek()) && !(c.peek() === '-' && c.peek(1) === '>' && c.pos > start)) c.pos++;
      key = c.text.slice(start, c.pos);
      if (!key) c.fail('JSON key or array index');
    }
    steps.push({ arrow, key, isIndex: !quoted && /^-?\d+$/.test(key) });
  }
  return steps;
}

export function readField(c: Cursor): FieldRef {
  const name = readName(c);
  return { name, jsonPath: readJsonPath(c) };
}

/** The comma-separated parts of `select` or `order`; commas inside quotes or parentheses stay. */
export function splitTopLevel(text: string): string[] {
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
