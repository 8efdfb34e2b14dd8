/**
 * GET /v1/me: the calling token as its holder may see it (docs/api.md, "Your token"): its id and
 * label, its scope with the universities it covers, whether it can write, its expiry, and the
 * limits that apply to it. Never the secret. It counts against the read rate limit like a read.
 */
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { describeToken } from '../domain/tokens.ts';
import { LIMITS, LIMIT_DESCRIPTIONS, type Limit } from '../limits.ts';
import { requireJsonAccept } from '../query/media-types.ts';
import { resourcesByName } from '../resources/registry.ts';
import { varyOn } from './response-headers.ts';
import { nullable, timestamp, tokenScope, uuid } from './schemas.ts';

export const ME_PATH = 'me';

/** Each limit's name in the answer, or null for one that binds only the operator. A new limit must say. */
const PARTNER_LIMIT_NAMES: Readonly<Record<Limit, string | null>> = {
  maxQueryStringBytes: 'query_string_bytes',
  maxConditions: 'conditions',
  maxTreeDepth: 'tree_depth',
  maxListValues: 'list_values',
  maxSelectItems: 'select_items',
  maxOutputColumns: 'output_columns',
  maxOrderTerms: 'order_terms',
  maxNesting: 'nesting',
  maxSearchTerms: 'search_terms',
  maxPatternLength: 'pattern_length',
  maxPatternRepetitions: 'pattern_repetitions',
  maxRepetitionBound: 'repetition_bound',
  rowsPerResponse: 'rows_per_response',
  wholePageRows: 'whole_page_rows',
  largePagesPerScope: 'large_pages_at_once',
  requestsInFlightPerToken: 'requests_in_flight',
  batchRows: 'batch_rows',
  bodyBytes: 'body_bytes',
  bodyDepth: 'body_depth',
  batchFieldNames: 'batch_field_names',
  fieldNameChars: 'field_name_chars',
  echoedKeyChars: 'echoed_key_chars',
  headerBytes: 'header_bytes',
  operatorPageRows: null,
  rotationGraceSeconds: null,
  idempotencyKeyChars: 'idempotency_key_chars',
  idempotencyKeySeconds: 'idempotency_key_seconds',
  idempotencyLeaseSeconds: 'idempotency_lease_seconds',
  changesPerResponse: 'changes_per_response',
};

const partnerLimits = (Object.entries(PARTNER_LIMIT_NAMES) as [Limit, string | null][])
  .flatMap(([limit, name]) => (name === null ? [] : [{ limit, name }]));

/** The answer; the route serializes with it, and the OpenAPI description names it `Me`. */
export const meResponse = Type.Object({
  id: uuid,
  label: nullable(Type.String()),
  scope: Type.Object({
    ...tokenScope.properties,
    universities: Type.Array(Type.Object({ id: uuid, name: Type.String() }), {
      description: 'The universities the token sees: its own, or every member of its consortium.',
    }),
  }),
  can_write: Type.Boolean(),
  created_at: timestamp,
  expires_at: nullable({ ...timestamp, description: 'null: the token does not expire.' }),
  rate_limits: Type.Object({
    reads_per_minute: Type.Integer({ description: 'Read requests a minute, counted per source IP.' }),
    writes_per_minute: Type.Integer({ description: 'Write requests a minute, counted per token; a token that cannot write has its refused attempts counted too.' }),
  }),
  limits: Type.Object(Object.fromEntries(partnerLimits.map(({ limit, name }) =>
    [name, Type.Integer({ description: LIMIT_DESCRIPTIONS[limit].bounds })]))),
}, { additionalProperties: false });

export interface MeRouteOptions extends Pick<Config, 'readLimitPerMin' | 'writeLimitPerMin'> {
  db: Database;
}

export const meRoute: FastifyPluginAsyncTypebox<MeRouteOptions> = async (app, options) => {
  // A resource of this name would be shadowed by this route (a static route wins over /:resource).
  if (resourcesByName.has(ME_PATH)) throw new Error(`"${ME_PATH}" is the token introspection path; no resource may take that name.`);
  const limits = Object.fromEntries(partnerLimits.map(({ limit, name }) => [name, LIMITS[limit]]));

  // Documented in src/http/openapi/operations.ts.
  app.get(`/${ME_PATH}`, {
    schema: { response: { 200: meResponse } },
  }, async (request, reply) => {
    // JSON or 406 by Accept.
    varyOn(reply, 'Accept');
    requireJsonAccept(request.headers.accept);
    const token = await options.db.asOperator((tx) => describeToken(tx, request.principal.tokenId));
    return {
      ...token,
      rate_limits: { reads_per_minute: options.readLimitPerMin, writes_per_minute: options.writeLimitPerMin },
      limits,
    };
  });
};
