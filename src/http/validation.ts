/**
 * How request schemas are checked, by the part of the request (Fastify's validator compiler).
 * Path and query parameters are text, so they are coerced to their schema's types, with defaults
 * filled in, as Fastify does by default. A JSON body is checked as sent: Fastify's default
 * coercion read `"true"` and `[1]` as true, `["x"]` as "x" and null as 0, so a rotation's
 * `grace_seconds: null` revoked the old token at once instead of being refused. Keys a schema does
 * not name are refused, not stripped, so a misspelt operator field (`can_wirte`) is a 400, not
 * silently a default.
 */
import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { isIsoDate } from '../writes/field-checks.ts';
import { isEmailAddress } from '../writes/student-rows.ts';

/** Fastify's own defaults (@fastify/ajv-compiler), but these two. */
const COMMON: Options = { useDefaults: true, removeAdditional: false, addUsedSchema: false, allErrors: false };

function compilerOf(options: Options): Ajv {
  const ajv = new Ajv({ ...COMMON, ...options });
  // ajv-formats is CommonJS: its function is the module's default export.
  addFormats.default(ajv);
  // A date as the partners' rows take one: ajv-formats' took year 0000, which PostgreSQL refuses (22008).
  ajv.addFormat('date', isIsoDate);
  // An address as the partners' rows take one (Unicode included, as RFC 6531's idn-email).
  ajv.addFormat('idn-email', isEmailAddress);
  return ajv;
}

export function requestValidator(): FastifySchemaCompiler<unknown> {
  const body = compilerOf({ coerceTypes: false });
  const text = compilerOf({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => (httpPart === 'body' ? body : text).compile(schema as object);
}
