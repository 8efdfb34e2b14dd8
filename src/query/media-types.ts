/**
 * The Accept header: which media type a response is written in, negotiated by `negotiator`
 * (q-values, wildcards, lists) against the types the service can render. Reads render JSON,
 * PostgREST's single object and CSV, the JSON forms also with their null members stripped
 * (`nulls=stripped`, postgrest-js's `.stripNulls()`); writes render JSON only. Anything else is
 * 406 PGRST107.
 */
import Negotiator from 'negotiator';
import { apiError } from '../errors.ts';

/** Every media type a read can answer with. */
export type ReadMediaType = 'json' | 'singular' | 'csv';

/** What a read answers with: the body's form, whether its objects drop their null members, and its Content-Type. */
export interface ReadRepresentation {
  readonly mediaType: ReadMediaType;
  readonly nullsStripped: boolean;
  readonly contentType: string;
}

/** The Content-Type of each media type as PostgREST writes it. */
export const READ_MEDIA_TYPES: Readonly<Record<ReadMediaType, string>> = {
  json: 'application/json; charset=utf-8',
  singular: 'application/vnd.pgrst.object+json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

/** The Content-Type of the JSON forms with nulls stripped, byte for byte PostgREST's. */
export const STRIPPED_MEDIA_TYPES: Readonly<Record<Exclude<ReadMediaType, 'csv'>, string>> = {
  json: 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8',
  singular: 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8',
};

interface ReadOffer {
  /** The media range offered to the Accept header, with its charset so that one naming it matches too. */
  readonly offered: string;
  readonly representation: ReadRepresentation;
}

const representation = (mediaType: ReadMediaType, nullsStripped: boolean, contentType: string): ReadRepresentation =>
  ({ mediaType, nullsStripped, contentType });

/**
 * What a read can answer, in the order a wildcard Accept (any type, `application/*`) or none
 * prefers them among those it may select; an Accept naming a type without `nulls=stripped`
 * matches the unstripped offer first. `application/vnd.pgrst.array+json` is JSON, as in PostgREST.
 */
const READ_OFFERS: readonly ReadOffer[] = [
  { offered: READ_MEDIA_TYPES.json, representation: representation('json', false, READ_MEDIA_TYPES.json) },
  { offered: 'application/vnd.pgrst.array+json; charset=utf-8', representation: representation('json', false, READ_MEDIA_TYPES.json) },
  { offered: STRIPPED_MEDIA_TYPES.json, representation: representation('json', true, STRIPPED_MEDIA_TYPES.json) },
  { offered: READ_MEDIA_TYPES.singular, representation: representation('singular', false, READ_MEDIA_TYPES.singular) },
  { offered: STRIPPED_MEDIA_TYPES.singular, representation: representation('singular', true, STRIPPED_MEDIA_TYPES.singular) },
  { offered: READ_MEDIA_TYPES.csv, representation: representation('csv', false, READ_MEDIA_TYPES.csv) },
];

/** A media type without its parameters, as an Accept header or a description names it. */
export const mediaTypeName = (contentType: string): string => contentType.split(';')[0];

/** A media type with the parameters that choose it, without the charset every answer has. */
export const mediaTypeWithParameters = (contentType: string): string => contentType.replace(/;\s*charset=utf-8$/, '');

/**
 * Offered only to an Accept that names them, with a q-value above 0: a wildcard never selects
 * PostgREST's vendor types (the single object is 406 unless there is exactly one row; JSON
 * refused with q=0 beside any type is CSV, not one object).
 */
const namedOnly = (offered: string) => mediaTypeName(offered).startsWith('application/vnd.pgrst.');

/** The offer an Accept header prefers among `offers`, or 406 PGRST107 naming what was asked. */
function negotiate<T extends { readonly offered: string }>(acceptHeader: string | undefined, offers: readonly T[]): T {
  // A blank Accept is read as none, as clients that send one mean.
  const accept = acceptHeader?.trim() ? acceptHeader : undefined;
  const negotiator = new Negotiator({ headers: accept === undefined ? {} : { accept } });
  // The type/subtype of every range the Accept lists with a q-value above 0, wildcards as written.
  const named = new Set(negotiator.mediaTypes().map((range) => range.toLowerCase()));
  const eligible = offers.filter((offer) => !namedOnly(offer.offered) || named.has(mediaTypeName(offer.offered)));
  const preferred = negotiator.mediaType(eligible.map((offer) => offer.offered));
  const chosen = eligible.find((offer) => offer.offered === preferred);
  if (chosen === undefined) throw apiError('PGRST107', acceptHeader ?? '', [...new Set(offers.map((offer) => mediaTypeName(offer.offered)))]);
  return chosen;
}

/** What a read answers with. */
export function negotiateRead(acceptHeader: string | undefined): ReadRepresentation {
  return negotiate(acceptHeader, READ_OFFERS).representation;
}

/** A write's batch report is JSON only: an Accept that excludes JSON is 406 before anything is written. */
export function requireJsonAccept(acceptHeader: string | undefined): void {
  negotiate(acceptHeader, [{ offered: READ_MEDIA_TYPES.json }]);
}
