/**
 * A read request's inputs → its syntax tree: the query string, then the Range and Prefer
 * headers, each read by its own module, and the Accept header as sent. Only the query string
 * is refused here (414, then its syntax); the planner refuses the rest in PostgREST's order
 * (src/query/plan.ts, planRead).
 */
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
    acceptHeader: input.acceptHeader,
  };
}
