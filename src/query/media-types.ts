/**
 * The Accept header: which media type a response is written in, negotiated by `negotiator`
 * (q-values, wildcards, lists) against the types the service can render. Reads render JSON,
 * PostgREST's single object and CSV; writes render JSON only. Anything else is 406 PGRST107.
 */
import Negotiator from 'negotiator';
import { apiError } from '../errors.ts';

/** Every media type a read can answer with. */
export type ReadMediaType = 'json' | 'singular' | 'csv';

/**
 * The Content-Type of each, in the order a wildcard Accept (any type, `application/*`) or none
 * prefers them among those it may select. Offered with their charset, so that an Accept that
 * names `charset=utf-8` matches too.
 */
export const READ_MEDIA_TYPES: Readonly<Record<ReadMediaType, string>> = {
  json: 'application/json; charset=utf-8',
  singular: 'application/vnd.pgrst.object+json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

const readOffers = Object.keys(READ_MEDIA_TYPES) as ReadMediaType[];

/**
 * Offered only to an Accept that names it, with a q-value above 0: a wildcard never selects the
 * single object, which is 406 unless there is exactly one row (JSON refused with q=0 beside any
 * type is CSV, not one object).
 */
const NAMED_ONLY: ReadonlySet<string> = new Set<ReadMediaType>(['singular']);

/** A media type without its parameters, as an Accept header or a description names it. */
export const mediaTypeName = (contentType: string): string => contentType.split(';')[0];

/** The offer an Accept header prefers among `offers`, or 406 PGRST107 naming what was asked. */
function negotiate<T extends string>(acceptHeader: string | undefined, offers: readonly T[], contentTypes: Readonly<Record<T, string>>): T {
  // A blank Accept is read as none, as clients that send one mean.
  const accept = acceptHeader?.trim() ? acceptHeader : undefined;
  const negotiator = new Negotiator({ headers: accept === undefined ? {} : { accept } });
  // The type/subtype of every range the Accept lists with a q-value above 0, wildcards as written.
  const named = new Set(negotiator.mediaTypes().map((range) => range.toLowerCase()));
  const eligible = offers.filter((offer) => !NAMED_ONLY.has(offer) || named.has(mediaTypeName(contentTypes[offer])));
  const preferred = negotiator.mediaType(eligible.map((offer) => contentTypes[offer]));
  const chosen = eligible.find((offer) => contentTypes[offer] === preferred);
  if (chosen === undefined) throw apiError('PGRST107', acceptHeader ?? '', offers.map((offer) => mediaTypeName(contentTypes[offer])));
  return chosen;
}

/** The media type a read answers with. */
export function negotiateReadMediaType(acceptHeader: string | undefined): ReadMediaType {
  return negotiate(acceptHeader, readOffers, READ_MEDIA_TYPES);
}

/** A write's batch report is JSON only: an Accept that excludes JSON is 406 before anything is written. */
export function requireJsonAccept(acceptHeader: string | undefined): void {
  negotiate(acceptHeader, ['json'], { json: READ_MEDIA_TYPES.json });
}
