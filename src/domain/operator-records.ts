/**
 * What the operator API shows of the records it creates (docs/decisions.md, "Operator API"):
 * each kind's fields, its filters, and the statements that list a page of them, read one, and
 * return one from its insert, so a create, a list and an item give the same object.
 */
import { UUID_PATTERN } from '../db/database.ts';
import { Parameters } from '../db/parameters.ts';
import type { Queryable } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { emailKey } from './email-register.ts';
import { isRenderedTimestamp, timestampJson } from './timestamps.ts';

export type OperatorCollection = 'consortia' | 'universities' | 'campuses' | 'resume-templates' | 'accounts' | 'tokens';

/** The SQL condition on the record (aliased `r`) for one value sent, bound by `bind` (which answers its placeholder). */
type Filter = (value: string, bind: (value: string) => string) => string;

interface RecordKind {
  readonly table: string;
  /** Output field → SQL expression over the record aliased `r`; `id` and `created_at` key the pages. */
  readonly fields: Readonly<{ id: string; created_at: string } & Record<string, string>>;
  readonly filters: Readonly<Record<string, Filter>>;
  /** The rows of the table that are records of this kind at all. */
  readonly only?: string;
}

const equals = (column: string, type: 'uuid' | 'text'): Filter => (value, bind) => `r.${column} = ${bind(value)}::${type}`;
/** Case-insensitive substring: the operator looks a record up by part of its name. */
const nameContains: Filter = (value, bind) => `strpos(lower(r.name), lower(${bind(value)})) > 0`;
const createdAt = timestampJson('r.created_at');
const universityId = { university_id: equals('university_id', 'uuid') };

const TOKEN_ACTIVE = '(r.revoked_at is null and (r.expires_at is null or r.expires_at > now()))';

export const OPERATOR_RECORDS = {
  consortia: {
    table: 'consortia',
    fields: { id: 'r.id', name: 'r.name', created_at: createdAt },
    filters: { name: nameContains },
  },
  universities: {
    table: 'universities',
    fields: {
      id: 'r.id', name: 'r.name', short_name: 'r.short_name', consortium_id: 'r.consortium_id', country: 'r.country',
      timezone: 'r.timezone', created_at: createdAt,
    },
    filters: { consortium_id: equals('consortium_id', 'uuid'), name: nameContains },
  },
  campuses: {
    table: 'campuses',
    fields: { id: 'r.id', university_id: 'r.university_id', name: 'r.name', city: 'r.city', country: 'r.country', created_at: createdAt },
    filters: { ...universityId, name: nameContains },
  },
  'resume-templates': {
    table: 'resume_templates',
    fields: { id: 'r.id', university_id: 'r.university_id', name: 'r.name', created_at: createdAt },
    filters: { ...universityId, name: nameContains },
  },
  // The accounts the operator creates. A student's account belongs to its university and is
  // read there with the university's token, so the operator API lists no student addresses. An
  // account without a university is stored as its own tenant (migration 004) and shown without.
  accounts: {
    table: 'accounts',
    only: `r.kind <> 'student'`,
    fields: { id: 'r.id', email: 'r.email', kind: 'r.kind', university_id: 'nullif(r.university_id, r.id)', created_at: createdAt },
    filters: { ...universityId, kind: equals('kind', 'text'), email: (value, bind) => `r.email = ${bind(emailKey(value))}` },
  },
  // Never the secret (it is not stored) nor its hash.
  tokens: {
    table: 'tokens',
    fields: {
      id: 'r.id',
      label: 'r.label',
      scope: `json_build_object(
        'kind', case when r.university_id is null then 'consortium' else 'university' end,
        'id', coalesce(r.university_id, r.consortium_id),
        'name', coalesce((select u.name from universities u where u.id = r.university_id),
                         (select c.name from consortia c where c.id = r.consortium_id)))`,
      university_id: 'r.university_id',
      consortium_id: 'r.consortium_id',
      can_write: 'r.can_write',
      created_at: createdAt,
      expires_at: timestampJson('r.expires_at'),
      revoked_at: timestampJson('r.revoked_at'),
      last_used_at: timestampJson('r.last_used_at'),
    },
    filters: {
      ...universityId,
      consortium_id: equals('consortium_id', 'uuid'),
      // Active: neither revoked nor expired, by the store's clock.
      active: (value, bind) => `${TOKEN_ACTIVE} = ${bind(value)}::boolean`,
    },
  },
} as const satisfies Readonly<Record<OperatorCollection, RecordKind>>;

export type RecordFields<C extends OperatorCollection> = keyof (typeof OPERATOR_RECORDS)[C]['fields'] & string;
export type RecordFilters<C extends OperatorCollection> = keyof (typeof OPERATOR_RECORDS)[C]['filters'] & string;
/** A record as the statements return it: scalars, and a token's scope as an object. */
export type OperatorRecord<C extends OperatorCollection> = Record<RecordFields<C>, unknown>;

/** The select list (and `returning` list) of a kind's fields. */
function recordFields(collection: OperatorCollection): string {
  return Object.entries(OPERATOR_RECORDS[collection].fields).map(([name, sql]) => `${sql} as "${name}"`).join(', ');
}

interface PageKey {
  readonly createdAt: string;
  readonly id: string;
}

const UUID = new RegExp(UUID_PATTERN);

/** An opaque cursor: the last record's (created_at, id), the order pages are read in. */
function encodeCursor(key: PageKey): string {
  return Buffer.from(JSON.stringify([key.createdAt, key.id])).toString('base64url');
}

function decodeCursor(cursor: string): PageKey {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    key = null;
  }
  if (!Array.isArray(key) || key.length !== 2 || typeof key[0] !== 'string' || typeof key[1] !== 'string'
    || !isRenderedTimestamp(key[0]) || !UUID.test(key[1])) {
    throw apiError('INVALID_PARAMETER', 'querystring/after is not a cursor this API answered with');
  }
  return { createdAt: key[0], id: key[1] };
}

export interface PageRequest<C extends OperatorCollection> {
  readonly limit: number;
  /** The `next_cursor` of the page before. */
  readonly after?: string;
  readonly filters: Readonly<Partial<Record<RecordFilters<C>, string>>>;
}

export interface Page<C extends OperatorCollection> {
  readonly items: OperatorRecord<C>[];
  readonly nextCursor: string | null;
}

/** One page of a kind's records, oldest first, with the cursor of the next page when there is one. */
export async function listRecords<C extends OperatorCollection>(tx: Queryable, collection: C, request: PageRequest<C>): Promise<Page<C>> {
  const kind: RecordKind = OPERATOR_RECORDS[collection];
  const params = new Parameters();
  const conditions = kind.only ? [kind.only] : [];
  for (const [name, value] of Object.entries(request.filters) as [string, string | undefined][]) {
    if (value !== undefined) conditions.push(kind.filters[name](value, (bound) => params.add(bound)));
  }
  if (request.after !== undefined) {
    const key = decodeCursor(request.after);
    conditions.push(`(r.created_at, r.id) > (${params.add(key.createdAt)}::timestamptz, ${params.add(key.id)}::uuid)`);
  }
  const where = conditions.length > 0 ? `where ${conditions.join(' and ')}` : '';
  const rows = await tx.query<OperatorRecord<C> & { id: string; created_at: string }>(
    `select ${recordFields(collection)} from ${kind.table} r ${where}
     order by r.created_at, r.id limit ${params.add(String(request.limit + 1))}`,
    params.values,
  );
  const items = rows.slice(0, request.limit);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > request.limit && last ? encodeCursor({ createdAt: last.created_at, id: last.id }) : null,
  };
}

/** One record of a kind by id, or null. */
export async function getRecord<C extends OperatorCollection>(tx: Queryable, collection: C, id: string): Promise<OperatorRecord<C> | null> {
  const kind: RecordKind = OPERATOR_RECORDS[collection];
  const [row] = await tx.query<OperatorRecord<C>>(
    `select ${recordFields(collection)} from ${kind.table} r where r.id = $1${kind.only ? ` and ${kind.only}` : ''}`,
    [id],
  );
  return row ?? null;
}
