/**
 * A read request's inputs → its syntax tree: the query string, then the Range, Prefer and Accept
 * headers, each read by its own module. Errors come in that order (414, then the query string's,
 * then Prefer's, then 406 for an Accept no read can answer).
 */
import { negotiateRead } from './media-types.ts';
import { parsePreferences } from './preferences.ts';
import { parseQueryParams } from './query-params.ts';
import { canonicalQueryString, decodeQueryString } from './query-string.ts';
import { parseRangeHeader } from './range.ts';
import type { ReadSyntax } from './syntax.ts';

export interface ReadRequestInput {
  /** Undecoded, as it came in the URL. */
  readonly queryString: string;
  readonly rangeHeader?: string;
  readonly preferHeader?: string | string[];
  /** The Range header applies to GET only, as in PostgREST. */
  readonly method: 'GET' | 'HEAD';
  readonly acceptHeader?: string;
}

export function parseReadRequest(input: ReadRequestInput): ReadSyntax {
  return {
    ...parseQueryParams(decodeQueryString(input.queryString)),
    canonicalQuery: canonicalQueryString(input.queryString),
    rangeHeader: input.method === 'GET' ? parseRangeHeader(input.rangeHeader) : null,
    ...parsePreferences(input.preferHeader),
    representation: negotiateRead(input.acceptHeader),
  };
}
