/**
 * The batch-write schemas of the OpenAPI description: create, patch and upsert rows off the write shapes,
 * their envelopes bounded by LIMITS, and the results with their codes off the row codes.
 */
import { LIMITS } from '../../limits.ts';
import { WRITABLE_RESOURCES, WRITE_SHAPES, type WritableResource } from '../../resources/write-shapes.ts';
import { ROW_STATUSES, WRITE_MODES } from '../../writes/batch.ts';
import { ROW_CODES } from '../../writes/row-codes.ts';
import { type JsonSchema, withNull } from '../schemas.ts';
import { rowRequirement, writeRowSchema } from '../write-schemas.ts';
import { schemaRef, writeSchemaNames } from './components.ts';

/** What a resource's results and response carry beyond what every batch write shares (src/writes/batches.ts). */
interface ResultExtras {
  readonly written: Readonly<Record<string, JsonSchema>>;
  readonly writtenRequired: readonly string[];
  readonly response: Readonly<Record<string, JsonSchema>>;
}

const RESULT_EXTRAS: Record<WritableResource, ResultExtras> = {
  students: {
    written: {
      cohort_id: { ...withNull({ type: 'string', format: 'uuid' }), description: 'The cohort the student is in.' },
      notes: {
        type: 'array', items: { type: 'string' },
        description: 'Present when something was accepted but not applied as sent: `is_alumni` disagrees with `graduation_date`, '
          + 'or a changed email was recorded as a secondary address.',
      },
    },
    writtenRequired: ['cohort_id'],
    response: {
      cohorts_created: { type: 'integer', description: 'Always 0: a student write never creates a cohort.' },
      invitations_sent: { type: 'integer', description: 'Always 0: no invitation is sent.' },
    },
  },
  cohorts: { written: {}, writtenRequired: [], response: {} },
};

function batchSchemas(resource: WritableResource): Record<string, JsonSchema> {
  const shape = WRITE_SHAPES[resource];
  const names = writeSchemaNames(resource);
  const extras = RESULT_EXTRAS[resource];
  const codes = ROW_CODES[resource];
  const requirements = [...new Set(WRITE_MODES.map((mode) => rowRequirement(shape, mode)))];
  return {
    ...Object.fromEntries(requirements.flatMap((requirement) => [
      [names.row(requirement), writeRowSchema(shape, requirement)],
      [names.batch(requirement), {
        type: 'object',
        required: [resource],
        properties: { [resource]: { type: 'array', maxItems: LIMITS.batchRows, items: schemaRef(names.row(requirement)) } },
      }],
    ])),
    [names.written]: {
      type: 'object',
      description: 'A row that was written, or matched and left unchanged.',
      required: [shape.key, 'status', 'id', ...extras.writtenRequired],
      properties: {
        [shape.key]: { type: 'string', description: `The \`${shape.key}\` as sent: match results back to your records with it.` },
        status: { type: 'string', enum: ROW_STATUSES.filter((s) => s !== 'rejected') },
        id: { type: 'string', format: 'uuid' },
        ...extras.written,
      },
    },
    [names.rejected]: {
      type: 'object',
      description: 'A row that was not written; nothing of it was saved.',
      required: [shape.key, 'status', 'code', 'message'],
      properties: {
        [shape.key]: { type: ['string', 'null'], description: `The \`${shape.key}\` as sent; null when the row carried none (or not a string).` },
        status: { type: 'string', const: 'rejected' },
        code: {
          type: 'string',
          enum: Object.keys(codes),
          description: Object.entries(codes).map(([code, when]) => `\`${code}\`: ${when}`).join('\n\n'),
        },
        message: { type: 'string' },
      },
    },
    [names.result]: {
      type: 'object',
      description: 'HTTP 200 means the batch was processed, not that every row was written: read `results`.',
      required: ['counts', ...Object.keys(extras.response), 'dropped_fields', 'results'],
      properties: {
        counts: schemaRef('BatchCounts'),
        ...extras.response,
        dropped_fields: {
          type: 'array', items: { type: 'string' },
          description: 'Keys sent in any row that the record does not hold, sorted; they were not saved.',
        },
        results: {
          type: 'array',
          description: 'One per row sent, in the order sent.',
          items: { oneOf: [schemaRef(names.written), schemaRef(names.rejected)] },
        },
      },
    },
  };
}

const BATCH_COUNTS: JsonSchema = {
  type: 'object',
  description: 'Rows per outcome.',
  required: [...ROW_STATUSES],
  properties: Object.fromEntries(ROW_STATUSES.map((status) => [status, { type: 'integer', minimum: 0 }])),
};

/** Every writable resource's batch schemas, and the counts they share. */
export const BATCH_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  ...Object.assign({}, ...WRITABLE_RESOURCES.map(batchSchemas)),
  BatchCounts: BATCH_COUNTS,
};
