/**
 * JSON schemas read off the write shapes (src/resources/write-shapes.ts), wrapped as TypeBox
 * schemas whose static type is the shape's own, so a route's body is typed by the schema that
 * describes it (through @fastify/type-provider-typebox).
 */
import { type TUnsafe, Type } from 'typebox';
import { LIMITS } from '../limits.ts';
import { NO_CONTROL_CHARACTERS_PATTERN } from '../resources/text.ts';
import {
  COHORT_SHAPE, type CreateValues, type FieldKind, WRITE_SHAPES, type WritableResource, type WriteField, type WriteShape,
} from '../resources/write-shapes.ts';

type JsonSchema = Record<string, unknown>;

const singleLine = (field: WriteField): JsonSchema => ({ type: 'string', maxLength: field.maxLength, pattern: NO_CONTROL_CHARACTERS_PATTERN });

const KIND_SCHEMAS: Record<FieldKind, (field: WriteField) => JsonSchema> = {
  // A required text field is never empty; the row rules also refuse a blank one.
  text: (field) => ({ ...singleLine(field), ...(field.requiredOnCreate ? { minLength: 1 } : {}) }),
  email: (field) => ({ type: 'string', format: 'email', maxLength: field.maxLength }),
  phone: (field) => ({ type: 'string', maxLength: field.maxLength }),
  date: () => ({ type: 'string', format: 'date' }),
  boolean: () => ({ type: 'boolean' }),
  integer: () => ({ type: 'integer' }),
  enum: (field) => ({ type: 'string', enum: field.values }),
  'text[]': (field) => ({ type: 'array', items: singleLine(field) }),
};

/** One field; a nullable one in OpenAPI 3.0's form, with null among an enumeration's values. */
export function fieldSchema(field: WriteField): JsonSchema {
  const schema = KIND_SCHEMAS[field.kind](field);
  const nullable = field.nullable ? { nullable: true, ...(field.values ? { enum: [...field.values, null] } : {}) } : {};
  return { ...schema, ...nullable, ...(field.description ? { description: field.description } : {}) };
}

const fieldSchemas = (shape: WriteShape) =>
  Object.fromEntries(Object.entries(shape.fields).map(([name, field]) => [name, fieldSchema(field)]));

/** A partner's batch row as documented: only the key is required in every mode. */
export function rowSchema(shape: WriteShape): JsonSchema {
  return {
    type: 'object',
    required: [shape.key],
    properties: fieldSchemas(shape),
    additionalProperties: true,
    description: 'Other keys are not saved and are listed in dropped_fields.',
  };
}

/**
 * The body of a batch write. Its rows are typed unknown: the route does not validate the body,
 * because each row is checked on its own into a per-row outcome, and batchRows checks the
 * envelope; the schema still documents each row with its shape.
 */
export function batchBody(resource: WritableResource) {
  const rows = Type.Array(Type.Unsafe<unknown>(rowSchema(WRITE_SHAPES[resource])), { maxItems: LIMITS.batchRows });
  return Type.Object({ [resource]: rows });
}

/** The operator API's cohort create: the university, the create fields, and the optional ones. */
export function cohortCreateBody(): TUnsafe<{ university_id: string } & CreateValues<typeof COHORT_SHAPE>> {
  const required = Object.entries(COHORT_SHAPE.fields).filter(([, field]) => field.requiredOnCreate).map(([name]) => name);
  return Type.Unsafe({
    type: 'object',
    required: ['university_id', ...required],
    additionalProperties: false,
    properties: { university_id: { type: 'string', format: 'uuid' }, ...fieldSchemas(COHORT_SHAPE) },
  });
}
