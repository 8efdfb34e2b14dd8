/**
 * The change feed's schemas in the OpenAPI description (src/query/changes.ts): a page of entries,
 * each a row in its read shape or a tombstone holding only the id.
 */
import { FEED_RESOURCES, type FeedResource, resourcesByName } from '../../resources/registry.ts';
import type { JsonSchema } from '../schemas.ts';
import { rowSchemaName, schemaRef, wholeRowSchema } from './components.ts';

/** The name of a resource's entry schema, e.g. `StudentChange`. */
const changeSchemaName = (resource: FeedResource): string => `${rowSchemaName(resourcesByName.get(resource)!)}Change`;

/** The name of a feed's page schema: every resource's entries, or one resource's. */
export const changePageSchemaName = (resource: FeedResource | 'all'): string =>
  (resource === 'all' ? 'ChangePage' : `${changeSchemaName(resource)}Page`);

const uuid: JsonSchema = { type: 'string', format: 'uuid' };

function entrySchema(resource: FeedResource): JsonSchema {
  const read = resourcesByName.get(resource)!;
  return {
    type: 'object',
    description: `A ${resource.replace(/s$/, '')} created or updated since the cursor, as it is now (as a read of /${resource} shows it).`,
    required: ['resource', 'id', 'change', 'row'],
    additionalProperties: false,
    properties: {
      resource: { type: 'string', const: resource },
      id: uuid,
      change: { type: 'string', enum: ['created', 'updated'], description: '`created`: the row did not exist at the cursor; `updated`: it did.' },
      // A feed sends whole rows: every column is there, though a read's row schema requires none.
      row: wholeRowSchema(read),
    },
  };
}

function tombstoneSchema(resources: readonly FeedResource[]): JsonSchema {
  return {
    type: 'object',
    description: 'A row erased since the cursor: its id and nothing else. Delete it from your copy.',
    required: ['resource', 'id', 'change'],
    additionalProperties: false,
    properties: { resource: { type: 'string', enum: [...resources] }, id: uuid, change: { type: 'string', const: 'erased' } },
  };
}

function pageSchema(resources: readonly FeedResource[]): JsonSchema {
  return {
    type: 'object',
    required: ['changes', 'next_cursor', 'has_more'],
    additionalProperties: false,
    properties: {
      changes: {
        type: 'array',
        description: 'In commit order per university, a consortium\'s members one after another in id order. A row changed several times since the cursor appears once, as it is now.',
        items: { oneOf: [...resources.map((r) => schemaRef(changeSchemaName(r))), tombstoneSchema(resources)] },
      },
      next_cursor: { type: 'string', description: 'Send it as `since` on the next call of the same feed; keep it between runs. Opaque.' },
      has_more: { type: 'boolean', description: 'true: more changes are waiting; call again at once with next_cursor.' },
    },
  };
}

export const CHANGE_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  ...Object.fromEntries(FEED_RESOURCES.map((r) => [changeSchemaName(r), entrySchema(r)])),
  [changePageSchemaName('all')]: pageSchema(FEED_RESOURCES),
  ...Object.fromEntries(FEED_RESOURCES.map((r) => [changePageSchemaName(r), pageSchema([r])])),
};
