/**
 * The served OpenAPI description as validators of real responses: Ajv 2020 (the JSON Schema
 * dialect of OpenAPI 3.1) over a sealed copy of the document, in which every object schema that
 * leaves `additionalProperties` open is closed, so a field the service sends without documenting
 * it fails too. The description itself stays open: clients must tolerate fields added later.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Json = any;

/** A copy of a document with every open object schema closed. */
function sealed(node: Json): Json {
  if (Array.isArray(node)) return node.map(sealed);
  if (node === null || typeof node !== 'object') return node;
  const copy = Object.fromEntries(Object.entries(node).map(([key, value]) => [key, sealed(value)]));
  return copy.type === 'object' && copy.properties && !('additionalProperties' in copy) ? { ...copy, additionalProperties: false } : copy;
}

const pointerEscape = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

export class DescriptionValidator {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly doc: Json) {
    addFormats.default(this.ajv);
    // The document's own keys are not JSON Schema keywords; the schemas inside it are compiled strictly.
    this.ajv.addVocabulary(Object.keys(doc));
    this.ajv.addSchema(sealed(doc), 'openapi.json');
  }

  /** The path item serving `url`, found through the document's servers. */
  private pathOf(url: string): string {
    const base = this.doc.servers[0].url;
    const partner = url.startsWith(`${base}/`) ? url.slice(base.length) : null;
    if (partner !== null && this.doc.paths[partner] && !this.doc.paths[partner].servers) return partner;
    if (this.doc.paths[url]?.servers?.some((s: { url: string }) => s.url === '/')) return url;
    throw new Error(`The description has no path serving ${url}.`);
  }

  /** The response object (references followed) and its JSON pointer for a method, URL and status. */
  response(method: string, url: string, status: number): { pointer: string; response: Json } {
    const path = this.pathOf(url);
    const operation = this.doc.paths[path][method.toLowerCase()];
    if (!operation) throw new Error(`The description has no ${method} ${url}.`);
    const response = operation.responses[String(status)];
    if (!response) throw new Error(`The description does not give ${method} ${url} a ${status} response.`);
    if (response.$ref) {
      const name = response.$ref.replace('#/components/responses/', '');
      return { pointer: `#/components/responses/${pointerEscape(name)}`, response: this.doc.components.responses[name] };
    }
    return { pointer: `#/paths/${pointerEscape(path)}/${method.toLowerCase()}/responses/${status}`, response };
  }

  private validator(ref: string): ValidateFunction {
    let validate = this.compiled.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `openapi.json${ref}` });
      this.compiled.set(ref, validate);
    }
    return validate;
  }

  /**
   * The problems of a body against what the description says `method url` answers with `status`
   * in `mediaType`; empty when it matches.
   */
  bodyProblems(method: string, url: string, status: number, body: unknown, mediaType = 'application/json'): string[] {
    const { pointer, response } = this.response(method, url, status);
    if (!response.content?.[mediaType]) return [`${method} ${url} ${status} is not documented as ${mediaType}`];
    const validate = this.validator(`${pointer}/content/${pointerEscape(mediaType)}/schema`);
    return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
  }

  /** The problems of the response headers the description names for this response (those sent). */
  headerProblems(method: string, url: string, status: number, headers: Record<string, unknown>): string[] {
    const { response } = this.response(method, url, status);
    const problems: string[] = [];
    for (const [name, header] of Object.entries<Json>(response.headers ?? {})) {
      const resolved = header.$ref ? this.doc.components.headers[header.$ref.replace('#/components/headers/', '')] : header;
      const value = headers[name.toLowerCase()];
      if (value === undefined) continue;
      const typed = resolved.schema.type === 'integer' ? Number(value) : value;
      const validate = this.ajv.compile(resolved.schema);
      if (!validate(typed)) problems.push(`${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(validate.errors)}`);
    }
    return problems;
  }
}
