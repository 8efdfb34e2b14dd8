/**
 * Listing and inspecting what the operator created: `GET /admin/v1/<collection>` pages through
 * the records oldest first (`limit`, and `after` set to the previous page's `next_cursor`),
 * narrowed by the collection's filters; `GET /admin/v1/<collection>/{id}` reads one. The fields
 * and filters are src/domain/operator-records.ts's; the schemas here must name each of them.
 */
import { type FastifyPluginAsyncTypebox, type TObject, type TSchema, Type } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { Database } from '../../db/database.ts';
import {
  type OperatorCollection, OPERATOR_RECORDS, type RecordFields, type RecordFilters, getRecord, listRecords,
} from '../../domain/operator-records.ts';
import { OPERATOR_ACCOUNT_KINDS } from '../../domain/onboarding.ts';
import { apiError } from '../../errors.ts';
import { LIMITS, OPERATOR_DEFAULTS } from '../../limits.ts';
import { MAX_EMAIL_LENGTH, MAX_NAME_LENGTH } from '../../resources/text.ts';
import { nullable, timestamp, tokenScope, uuid } from '../schemas.ts';
import { idParams } from './schemas.ts';

const text = Type.String();
const nullableText = nullable(text);
const nullableUuid = nullable(uuid);
const nullableTimestamp = nullable(timestamp);
const nameFilter = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'Part of the name, any case.' });
const uuidFilter = Type.String({ format: 'uuid' });

interface CollectionSchemas<C extends OperatorCollection> {
  /** What a record holds, field by field. */
  readonly fields: { readonly [F in RecordFields<C>]: TSchema };
  /** What each filter accepts. */
  readonly filters: { readonly [F in RecordFilters<C>]: TSchema };
  /** The record's name in a 404's message. */
  readonly noun: string;
}

const RECORD_SCHEMAS: { readonly [C in OperatorCollection]: CollectionSchemas<C> } = {
  consortia: {
    noun: 'consortium',
    fields: { id: uuid, name: text, created_at: timestamp },
    filters: { name: nameFilter },
  },
  universities: {
    noun: 'university',
    fields: {
      id: uuid, name: text, short_name: nullableText, consortium_id: nullableUuid, country: nullableText, timezone: nullableText,
      created_at: timestamp,
    },
    filters: { consortium_id: uuidFilter, name: nameFilter },
  },
  campuses: {
    noun: 'campus',
    fields: { id: uuid, university_id: uuid, name: text, city: nullableText, country: nullableText, created_at: timestamp },
    filters: { university_id: uuidFilter, name: nameFilter },
  },
  'resume-templates': {
    noun: 'resume template',
    fields: { id: uuid, university_id: uuid, name: text, created_at: timestamp },
    filters: { university_id: uuidFilter, name: nameFilter },
  },
  accounts: {
    noun: 'staff or self-serve account',
    fields: {
      id: uuid,
      email: Type.String({ description: 'Personal data: shown to the operator, who created the account, and never logged.' }),
      kind: Type.Enum(OPERATOR_ACCOUNT_KINDS),
      university_id: nullableUuid,
      created_at: timestamp,
    },
    filters: {
      university_id: uuidFilter,
      kind: Type.Enum(OPERATOR_ACCOUNT_KINDS),
      email: Type.String({ minLength: 1, maxLength: MAX_EMAIL_LENGTH, description: 'The whole address, any case.' }),
    },
  },
  tokens: {
    noun: 'token',
    fields: {
      id: uuid,
      label: nullableText,
      scope: tokenScope,
      university_id: nullableUuid,
      consortium_id: nullableUuid,
      can_write: Type.Boolean(),
      created_at: timestamp,
      expires_at: nullableTimestamp,
      revoked_at: nullableTimestamp,
      last_used_at: { ...nullableTimestamp, description: 'Coarse: written at most once a minute per token.' },
    },
    filters: {
      university_id: uuidFilter,
      consortium_id: uuidFilter,
      active: Type.Enum(['true', 'false'], { description: 'true: neither revoked nor expired; false: revoked or expired.' }),
    },
  },
};

/** A record of the collection as every operator response shows it (creates, lists, items). */
export function recordSchema(collection: OperatorCollection) {
  return Type.Object(RECORD_SCHEMAS[collection].fields as Record<string, TSchema>, { additionalProperties: false });
}

const pageParameters = {
  limit: Type.Integer({ minimum: 1, maximum: LIMITS.operatorPageRows, default: OPERATOR_DEFAULTS.pageRows }),
  after: Type.Optional(Type.String({ minLength: 1, description: 'The next_cursor of the page before.' })),
};

function pageSchema(collection: OperatorCollection) {
  return Type.Object({
    items: Type.Array(recordSchema(collection)),
    next_cursor: nullable(Type.String({ description: 'Pass as `after` for the next page; null on the last page.' })),
    next: nullable(Type.String({ description: 'The next page\'s path with the same filters; null on the last page.' })),
  });
}

/**
 * A query parameter the collection does not know is refused, not ignored: an operator who
 * misspells a filter must not get every record back as if it matched. A whole number is written
 * in digits: the schema's coercion read `0x2`, `2e0`, `+5` and `5.0` as numbers.
 */
function refuseUnknownParameters(querystring: TObject) {
  const known = Object.keys(querystring.properties);
  return async (request: FastifyRequest) => {
    for (const [name, value] of Object.entries(request.query as Record<string, unknown>)) {
      if (!known.includes(name)) throw apiError('INVALID_PARAMETER', `querystring/${name} is not a parameter here; the parameters are ${known.join(', ')}`);
      if ((querystring.properties[name] as { type?: unknown }).type === 'integer' && !(typeof value === 'string' && /^\d+$/.test(value))) {
        throw apiError('INVALID_PARAMETER', `querystring/${name} must be a whole number written in digits`);
      }
    }
  };
}

type PageQuery = { limit: number; after?: string } & Record<string, string | number | undefined>;

type OperatorApp = Parameters<FastifyPluginAsyncTypebox>[0];

function registerCollection(app: OperatorApp, db: Database, collection: OperatorCollection): void {
  const { filters, noun } = RECORD_SCHEMAS[collection];
  const optionalFilters = Object.fromEntries(Object.entries(filters as Record<string, TSchema>).map(([name, schema]) => [name, Type.Optional(schema)]));
  const querystring = Type.Object({ ...pageParameters, ...optionalFilters }, { additionalProperties: false });
  const path = `${app.prefix}/${collection}`;

  app.get(`/${collection}`, {
    schema: { querystring, response: { 200: pageSchema(collection) } },
    preValidation: refuseUnknownParameters(querystring),
  }, async (request) => {
    const query = request.query as PageQuery;
    const { limit, after, ...given } = query;
    const page = await db.asOperator((tx) => listRecords(tx, collection, { limit, after, filters: given as Record<string, string> }));
    const next = page.nextCursor === null ? null
      : `${path}?${new URLSearchParams(Object.entries({ ...query, after: page.nextCursor }).map(([k, v]) => [k, String(v)]))}`;
    return { items: page.items, next_cursor: page.nextCursor, next };
  });

  app.get(`/${collection}/:id`, { schema: { params: idParams, response: { 200: recordSchema(collection) } } }, async (request) => {
    const record = await db.asOperator((tx) => getRecord(tx, collection, request.params.id));
    if (!record) throw apiError('NOT_FOUND', `No ${noun} has that id.`);
    return record;
  });
}

export const recordRoutes: FastifyPluginAsyncTypebox<{ db: Database }> = async (app, { db }) => {
  for (const collection of Object.keys(OPERATOR_RECORDS) as OperatorCollection[]) registerCollection(app, db, collection);
};
