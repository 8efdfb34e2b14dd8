/**
 * GET/HEAD /v1/<resource> for the 14 resources: parse → plan → execute → status and headers
 * (src/http/read-response.ts) → PostgreSQL's JSON out. The query string is decoded from the raw
 * URL by src/query/query-string.ts, not by Fastify, because PostgREST's grammar decides how keys
 * repeat and how `+` and escapes decode.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { type ApiError, apiError } from '../errors.ts';
import { executeRead } from '../query/execute.ts';
import { LargePageSlots } from '../query/large-pages.ts';
import { planPage } from '../query/plan.ts';
import { readPlanOf } from '../query/read-plans.ts';
import { type ReadRequestInput, parseReadRequest } from '../query/read-request.ts';
import { type Resource, resources } from '../resources/registry.ts';
import { type ReadResponseHead, readResponseHead } from './read-response.ts';
import { varyOn } from './response-headers.ts';

/** The raw query string, undecoded. */
export function rawQueryString(request: FastifyRequest): string {
  const url = request.raw.url ?? '';
  const at = url.indexOf('?');
  return at < 0 ? '' : url.slice(at + 1);
}

/**
 * The request headers beside the URL that `readRequestInput` reads, so that a cache keeps one
 * answer per combination (RFC 9110, 12.5.5): the same URL answers JSON or CSV by Accept, a total
 * by Prefer and another page by Range, whose `<first>-<last>` without a unit a cache would not
 * read as a byte range.
 */
const READ_VARY = 'Accept, Prefer, Range';

/** A read's inputs as the query language takes them. */
const readRequestInput = (request: FastifyRequest): ReadRequestInput => ({
  queryString: rawQueryString(request),
  rangeHeader: request.headers.range,
  preferHeader: request.headers.prefer,
  acceptHeader: request.headers.accept,
  method: request.method === 'HEAD' ? 'HEAD' : 'GET',
});

function readHandler(db: Database, resource: Resource, plannedCounts: boolean, largePages: LargePageSlots) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const head = request.method === 'HEAD';
    varyOn(reply, READ_VARY);
    const plan = readPlanOf(resource, readRequestInput(request));
    const result = await executeRead(db, request.principal, plan, {
      head,
      plannedCounts,
      // The code only: a failure's message can quote a row's value, and personal data stays out of logs.
      onLateError: (error) => request.log.error({ code: (error as { code?: unknown }).code }, 'streaming a page failed; the response was aborted'),
      largePages,
    });
    let responseHead: ReadResponseHead;
    try {
      responseHead = readResponseHead(plan, result);
    } catch (error) {
      // A stream no one reads would hold its transaction open.
      if (result.body instanceof Readable) result.body.destroy();
      throw error;
    }
    const { status, headers } = responseHead;
    reply.code(status).headers(headers);
    return reply.send(head ? undefined : result.body);
  };
}

/**
 * A name under /v1 that no resource (nor any other route) has: 404 PGRST205, as PostgREST
 * answers. A read's query string and range are read first, as PostgREST reads them before it
 * looks the resource up: one that does not parse is 400, a range that cannot be served 416.
 */
export function unknownResource(request: FastifyRequest): ApiError {
  if (request.method === 'GET' || request.method === 'HEAD') planPage(parseReadRequest(readRequestInput(request)));
  const { resource } = request.params as { resource: string };
  return apiError('PGRST205', resource, resources.map((r) => r.name));
}

/** A path below a resource's (`/v1/students/1`): 404 PGRST125, as PostgREST answers. */
export const invalidResourcePath = (): ApiError => apiError('PGRST125');

/** A function call, `/v1/rpc/<name>` (postgrest-js's `rpc()`): 404 PGRST202, as PostgREST answers for a function it lacks. */
export function unknownFunction(request: FastifyRequest): ApiError {
  const { name } = request.params as { name: string };
  return apiError('PGRST202', name);
}

export function registerReadRoutes(app: FastifyInstance, deps: { db: Database; plannedCounts: boolean }): void {
  const largePages = new LargePageSlots(deps.db.store.transactionConnections);
  for (const resource of resources) {
    // HEAD is declared, not left to Fastify's generated route, which would send `Content-Length: 0`
    // for a body never built; PostgREST sends none (RFC 9110 allows only the GET's own length).
    app.route({ method: ['GET', 'HEAD'], url: `/${resource.name}`, handler: readHandler(deps.db, resource, deps.plannedCounts, largePages) });
  }
}
