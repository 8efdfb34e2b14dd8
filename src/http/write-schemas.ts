/**
 * JSON Schemas (2020-12, the dialect of OpenAPI 3.1) read off the write shapes
 * (src/resources/write-shapes.ts): the rows of the batch writes in the OpenAPI description
 * (src/http/openapi/components.ts), and the operator API's cohort body, which Fastify validates.
 */
import { type TUnsafe, Type } from 'typebox';
import { NAME_PATTERN, PHONE_PATTERN, SINGLE_LINE_TEXT_PATTERN } from '../resources/text.ts';
import { COHORT_SHAPE, type CreateValues, type FieldKind, type WriteField, type WriteShape } from '../resources/write-shapes.ts';
import type { WriteMode } from '../writes/batch.ts';
import { createFieldsRequired } from '../writes/field-checks.ts';
import { type JsonSchema, withNull } from './schemas.ts';

const singleLine = (field: WriteField): JsonSchema => ({ type: 'string', maxLength: field.maxLength, pattern: SINGLE_LINE_TEXT_PATTERN });

const KIND_SCHEMAS: Record<FieldKind, (field: WriteField) => JsonSchema> = {
  // No text field or list entry is blank, as the row rules say: a blank required one is missing,
  // a blank optional one or entry refused (null clears a field).
  text: (field) => ({ ...singleLine(field), pattern: NAME_PATTERN }),
  email: (field) => ({ type: 'string', format: 'idn-email', maxLength: field.maxLength }),
  phone: (field) => ({ type: 'string', maxLength: field.maxLength, pattern: PHONE_PATTERN }),
  date: () => ({ type: 'string', format: 'date' }),
  boolean: () => ({ type: 'boolean' }),
  integer: (field) => ({ type: 'integer', ...(field.range ? { minimum: field.range.min, maximum: field.range.max } : {}) }),
  enum: (field) => ({ type: 'string', enum: [...field.values ?? []] }),
  'text[]': (field) => ({ type: 'array', items: { ...singleLine(field), pattern: NAME_PATTERN } }),
};

function fieldSchema(field: WriteField): JsonSchema {
  const schema = KIND_SCHEMAS[field.kind](field);
  return { ...(field.nullable ? withNull(schema) : schema), ...(field.description ? { description: field.description } : {}) };
}

const fieldSchemas = (shape: WriteShape) => ({
  ...Object.fromEntries(Object.entries(shape.fields).map(([name, field]) => [name, fieldSchema(field)])),
  ...Object.fromEntries(Object.entries(shape.ignored ?? {}).map(([name, description]): [string, JsonSchema] => [name, { type: 'string', description }])),
});

/**
 * What a row must carry: every field a create needs (`create`); for a patch the key alone
 * (`patch`); for an upsert whose matched rows may leave fields out (WriteShape.put `key`), the key,
 * and every field a create needs when it creates (`upsert`).
 */
export type RowRequirement = 'create' | 'patch' | 'upsert';

/** What each row of a `mode` batch of `shape` must carry. */
export const rowRequirement = (shape: WriteShape, mode: WriteMode): RowRequirement =>
  mode === 'patch' ? 'patch' : createFieldsRequired(shape, mode) ? 'create' : 'upsert';

/** What a row of each requirement must carry, as its schema and its operation say. */
export const REQUIREMENT_DESCRIPTIONS: Record<RowRequirement, (key: string) => string> = {
  create: () => 'Every field a create needs is required.',
  patch: (key) => `Only \`${key}\` is required; an omitted field is left as it is.`,
  upsert: (key) => `Only \`${key}\` is required; a row that creates needs every field a create needs (\`MISSING_FIELD\` otherwise), and a row that matches leaves an omitted field as it is.`,
};

/**
 * A partner's batch row. Other keys are accepted, not saved, and listed in `dropped_fields`:
 * JSON Schema admits them while `additionalProperties` is unset, and leaving it unset keeps
 * generated clients from typing rows as open records, so a misspelt field does not compile.
 */
export function writeRowSchema(shape: WriteShape, requirement: RowRequirement): JsonSchema {
  const required = requirement === 'create'
    ? Object.entries(shape.fields).filter(([, field]) => field.requiredOnCreate).map(([name]) => name)
    : [shape.key];
  return {
    type: 'object',
    required,
    properties: fieldSchemas(shape),
    description: `${REQUIREMENT_DESCRIPTIONS[requirement](shape.key)} `
      + 'Keys the record does not hold are accepted, not saved, and listed in `dropped_fields` '
      + '(`additionalProperties` is left unset, so JSON Schema admits them; typed clients still refuse a misspelt field).',
  };
}

/** The operator API's cohort create: the university, the create fields, and the optional ones. */
export function cohortCreateBody(): TUnsafe<{ university_id: string } & CreateValues<typeof COHORT_SHAPE>> {
  const { required = [], properties } = writeRowSchema(COHORT_SHAPE, 'create');
  return Type.Unsafe({
    type: 'object',
    required: ['university_id', ...required],
    additionalProperties: false,
    properties: { university_id: { type: 'string', format: 'uuid' }, ...properties },
  });
}
