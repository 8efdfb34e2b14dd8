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

/**
 * PostgREST's vendor types: its array (JSON, or JSON with nulls stripped) and its single object,
 * each also named without its `+json` suffix, as PostgREST takes them (its MediaType module).
 */
const PGRST_ARRAY = 'application/vnd.pgrst.array+json';
const PGRST_OBJECT = 'application/vnd.pgrst.object+json';
const withoutSuffix = (name: string) => name.slice(0, -'+json'.length);
/** The vendor types' names without `+json`: taken, not advertised. */
const SUFFIXLESS_NAMES: ReadonlySet<string> = new Set([PGRST_ARRAY, PGRST_OBJECT].map(withoutSuffix));
/** Every name of the vendor types. */
const VENDOR_NAMES: ReadonlySet<string> = new Set([PGRST_ARRAY, PGRST_OBJECT, ...SUFFIXLESS_NAMES]);
const CHARSET = '; charset=utf-8';

/** The Content-Type of every JSON answer but the vendor forms: reads, writes, the change feed and errors. */
export const JSON_CONTENT_TYPE = `application/json${CHARSET}`;

/** The Content-Type of each media type as PostgREST writes it. */
export const READ_MEDIA_TYPES: Readonly<Record<ReadMediaType, string>> = {
  json: JSON_CONTENT_TYPE,
  singular: `${PGRST_OBJECT}${CHARSET}`,
  csv: `text/csv${CHARSET}`,
};

/** The Content-Type of the JSON forms with nulls stripped, byte for byte PostgREST's. */
export const STRIPPED_MEDIA_TYPES: Readonly<Record<Exclude<ReadMediaType, 'csv'>, string>> = {
  json: `${PGRST_ARRAY};nulls=stripped${CHARSET}`,
  singular: `${PGRST_OBJECT};nulls=stripped${CHARSET}`,
};

/** A media type without its parameters, as an Accept header or a description names it. */
export const mediaTypeName = (contentType: string): string => contentType.split(';')[0];

interface ReadOffer {
  /** The media range offered to the Accept header, with its charset so that one naming it matches too. */
  readonly offered: string;
  readonly representation: ReadRepresentation;
}

/** An offer answered in the Content-Type it is offered as, unless `offered` names another range. */
const offer = (mediaType: ReadMediaType, nullsStripped: boolean, contentType: string, offered = contentType): ReadOffer =>
  ({ offered, representation: { mediaType, nullsStripped, contentType } });

/** PostgREST's vendor types as offers: `application/vnd.pgrst.array+json` is JSON, as in PostgREST. */
const VENDOR_OFFERS: readonly ReadOffer[] = [
  offer('json', false, READ_MEDIA_TYPES.json, `${PGRST_ARRAY}${CHARSET}`),
  offer('json', true, STRIPPED_MEDIA_TYPES.json),
  offer('singular', false, READ_MEDIA_TYPES.singular),
  offer('singular', true, STRIPPED_MEDIA_TYPES.singular),
];

/** A vendor offer under its name without `+json`, answered in the same Content-Type. */
const suffixless = ({ offered, representation }: ReadOffer): ReadOffer => {
  const name = mediaTypeName(offered);
  return { offered: withoutSuffix(name) + offered.slice(name.length), representation };
};

/**
 * What a read can answer, in the order a wildcard Accept (any type, `application/*`) or none
 * prefers them among those it may select; a range naming a type without `nulls=stripped` matches
 * the unstripped offer first. At equal q-values `negotiator` prefers the more specific range, as
 * PostgREST does (wai-extra's parseHttpAccept orders ranges by q, then by their parameters less
 * their wildcards): any type and `text/csv` listed together is CSV, and
 * `application/json, <array>;nulls=stripped` is stripped.
 */
const READ_OFFERS: readonly ReadOffer[] = [
  offer('json', false, READ_MEDIA_TYPES.json),
  ...VENDOR_OFFERS,
  offer('csv', false, READ_MEDIA_TYPES.csv),
  ...VENDOR_OFFERS.map(suffixless),
];

/** A media type with the parameters that choose it, without the charset every answer has. */
export const mediaTypeWithParameters = (contentType: string): string => (contentType.endsWith(CHARSET) ? contentType.slice(0, -CHARSET.length) : contentType);

/**
 * Offered only to an Accept that names them, with a q-value above 0: a wildcard never selects
 * PostgREST's vendor types (the single object is 406 unless there is exactly one row; JSON
 * refused with q=0 beside any type is CSV, not one object).
 */
const namedOnly = (offered: string) => VENDOR_NAMES.has(mediaTypeName(offered));

/** The offer an Accept header prefers among `offers`, or 406 PGRST107 naming what was asked. */
function negotiate<T extends { readonly offered: string }>(acceptHeader: string | undefined, offers: readonly T[]): T {
  // A blank Accept, or one of empty list elements (RFC 9110, 5.6.1), is read as none, as clients that send one mean.
  const accept = acceptHeader?.replace(/[\s,]/g, '') ? acceptHeader : undefined;
  const negotiator = new Negotiator({ headers: accept === undefined ? {} : { accept } });
  // The type/subtype of every range the Accept lists with a q-value above 0, wildcards as written.
  const named = new Set(negotiator.mediaTypes().map((range) => range.toLowerCase()));
  const eligible = offers.filter((offer) => !namedOnly(offer.offered) || named.has(mediaTypeName(offer.offered)));
  const preferred = negotiator.mediaType(eligible.map((offer) => offer.offered));
  const chosen = eligible.find((offer) => offer.offered === preferred);
  if (chosen === undefined) {
    const advertised = offers.map((offer) => mediaTypeName(offer.offered)).filter((name) => !SUFFIXLESS_NAMES.has(name));
    throw apiError('PGRST107', acceptHeader ?? '', [...new Set(advertised)]);
  }
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
