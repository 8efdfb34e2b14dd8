/**
 * The raw query string → decoded key/value pairs, once (PostgREST's grammar decides how keys
 * repeat and how `+` and escapes decode, so Fastify's own parsing is not used). A query string
 * over the limit is refused here with 414, before any of it is read.
 */
import { unescape } from 'node:querystring';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';

const decode = (s: string) => unescape(s.replace(/\+/g, ' '));

/**
 * What separates parameters: `&`, and `;` as well, as PostgREST reads a query string (http-types'
 * parseQueryReplacePlus); a hand-written `eq.Comma;limit=1` filtered on the text `Comma;limit=1`.
 */
const SEPARATOR = /[&;]/;

/** A query string over the limit is 414, for a read and the change feed alike, before any of it is read. */
export function checkQueryStringLength(queryString: string): void {
  if (queryString.length > LIMITS.maxQueryStringBytes) throw apiError('URI_TOO_LONG');
}

/** Decodes once: `+` is a space, percent-escapes are undone, a key without `=` is dropped. */
export function decodeQueryString(queryString: string): [string, string][] {
  checkQueryStringLength(queryString);
  const pairs: [string, string][] = [];
  for (const item of queryString.split(SEPARATOR)) {
    const eq = item.indexOf('=');
    if (eq < 0) continue;
    pairs.push([decode(item.slice(0, eq)), decode(item.slice(eq + 1))]);
  }
  return pairs;
}

/**
 * The query string with its parameters in key order (by decoded key; a key's repeats keep their
 * order), each as it was sent, a key without `=` dropped: PostgREST's canonical query string,
 * which names the page in `Content-Location`.
 */
export function canonicalQueryString(queryString: string): string {
  return queryString.split(SEPARATOR)
    .filter((item) => item.includes('='))
    .map((item) => ({ item, key: decode(item.slice(0, item.indexOf('='))) }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ item }) => item)
    .join('&');
}
