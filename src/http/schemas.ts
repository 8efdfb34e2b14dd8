/**
 * Schema pieces the partner and operator routes and the OpenAPI description share, each defined
 * once: plain JSON Schema (2020-12, the dialect of OpenAPI 3.1) and TypeBox schemas, whose static
 * types are the handlers' types (@fastify/type-provider-typebox).
 */
import type { OpenAPIV3_1 } from 'openapi-types';
import { type Static, type TSchema, Type } from 'typebox';

export type JsonSchema = OpenAPIV3_1.SchemaObject;

/**
 * The JSON Schema that also admits null: null joins its type list; an enumeration, or a schema
 * without a type, is one alternative of two, null the other. openapi-zod-client turned an
 * enumeration holding null into `z.enum([…, null])`, which does not compile.
 */
export function withNull(schema: JsonSchema): JsonSchema {
  if (schema.type !== undefined && !schema.enum) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    return { ...schema, type: [...types, 'null'] };
  }
  return { anyOf: [schema, { type: 'null' }] };
}

/** The TypeBox schema that also admits null. */
export const nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>(withNull(schema as JsonSchema));

export const uuid = Type.String({ format: 'uuid' });

/** src/domain/timestamps.ts's format. */
export const timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 with an explicit offset.' });

/** What a token is scoped to: one university or one consortium. */
export const tokenScope = Type.Object({ kind: Type.Enum(['university', 'consortium'], { type: 'string' }), id: uuid, name: Type.String() });
