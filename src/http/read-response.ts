/**
 * What a read answers over HTTP, from what was read: the status (200, or 206 for a partial page
 * of a counted total, or 416 for an offset past the total), Content-Range, Content-Location,
 * Preference-Applied and Content-Type (the negotiated media type). PostgREST's rules (docs/api.md, "Reading":
 * Pages, Counts, One object, Media types).
 */
import { apiError } from '../errors.ts';
import { type ReadResult, offsetPastTotal } from '../query/execute.ts';
import type { ReadPlan } from '../query/plan.ts';
import { PARTNER_PREFIX } from './prefixes.ts';
import { RESPONSE_HEADERS } from './response-headers.ts';

/**
 * The longest Content-Location sent. Node's HTTP clients (undici's fetch, node:http) refuse an
 * answer whose header block passes 16 KiB, and a query string may take 16,384 bytes
 * (LIMITS.maxQueryStringBytes): postgrest-js's `in` with 418 ids was served, counted against the
 * read limit and never read, four times over. A longer location is left out: it only names the
 * page that was asked for.
 */
export const MAX_CONTENT_LOCATION_BYTES = 8_192;

export interface ReadResponseHead {
  readonly status: 200 | 206;
  readonly headers: Readonly<Record<string, string>>;
}

export function readResponseHead(plan: ReadPlan, result: Pick<ReadResult, 'rows' | 'total'>): ReadResponseHead {
  const lower = plan.page.offset;
  const rangePart = result.rows > 0 && result.total !== 0 ? `${lower}-${lower + BigInt(result.rows - 1)}` : '*';
  const totalPart = result.total === null ? '*' : String(result.total);
  if (offsetPastTotal(plan, result.total)) {
    throw apiError('PGRST103', `An offset of ${lower} was requested, but there are only ${result.total} rows.`)
      .withHeaders({ [RESPONSE_HEADERS.contentRange]: `*/${totalPart}` });
  }
  const headers: Record<string, string> = {
    'content-type': plan.contentType,
    [RESPONSE_HEADERS.contentRange]: `${rangePart}/${totalPart}`,
  };
  const location = `${PARTNER_PREFIX}/${plan.resource.name}${plan.canonicalQuery === '' ? '' : `?${plan.canonicalQuery}`}`;
  if (Buffer.byteLength(location) <= MAX_CONTENT_LOCATION_BYTES) headers[RESPONSE_HEADERS.contentLocation] = location;
  if (plan.preferenceApplied.length > 0) headers[RESPONSE_HEADERS.preferenceApplied] = plan.preferenceApplied.join(', ');
  const status = result.total !== null && result.rows < result.total ? 206 : 200;
  return { status, headers };
}
