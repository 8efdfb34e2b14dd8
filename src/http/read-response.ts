/**
 * What a read answers over HTTP, from what was read: the status (200, or 206 for a partial page
 * of a counted total, or 416 for an offset past the total), Content-Range, Content-Location,
 * Preference-Applied and Content-Type (the negotiated media type). PostgREST's rules (docs/api.md, "Reading":
 * Pages, Counts, One object, Media types).
 */
import { apiError } from '../errors.ts';
import type { ReadResult } from '../query/execute.ts';
import type { ReadPlan } from '../query/plan.ts';
import { PARTNER_PREFIX } from './prefixes.ts';
import { RESPONSE_HEADERS } from './response-headers.ts';

export interface ReadResponseHead {
  readonly status: 200 | 206;
  readonly headers: Readonly<Record<string, string>>;
}

export function readResponseHead(plan: ReadPlan, result: Pick<ReadResult, 'rows' | 'total'>): ReadResponseHead {
  const lower = plan.page.offset;
  const rangePart = result.rows > 0 && result.total !== 0 ? `${lower}-${lower + BigInt(result.rows - 1)}` : '*';
  const totalPart = result.total === null ? '*' : String(result.total);
  if (result.total !== null && lower > result.total) {
    throw apiError('PGRST103', `An offset of ${lower} was requested, but there are only ${result.total} rows.`)
      .withHeaders({ [RESPONSE_HEADERS.contentRange]: `*/${totalPart}` });
  }
  const headers: Record<string, string> = {
    'content-type': plan.contentType,
    [RESPONSE_HEADERS.contentRange]: `${rangePart}/${totalPart}`,
    [RESPONSE_HEADERS.contentLocation]: `${PARTNER_PREFIX}/${plan.resource.name}${plan.canonicalQuery === '' ? '' : `?${plan.canonicalQuery}`}`,
  };
  if (plan.preferenceApplied.length > 0) headers[RESPONSE_HEADERS.preferenceApplied] = plan.preferenceApplied.join(', ');
  const status = result.total !== null && result.rows < result.total ? 206 : 200;
  return { status, headers };
}
