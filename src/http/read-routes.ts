/**
 * GET/HEAD /v1/<resource> for the 14 resources: parse → plan → execute → status and headers
 * (src/http/read-response.ts) → PostgreSQL's JSON out. The query string is decoded from the raw
 * URL by src/query/query-string.ts, not by Fastify, because PostgREST's grammar decides how keys
 * repeat and how `+` and escapes decode.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { apiError } from '../errors.ts';
import { executeRead } from '../query/execute.ts';
import { planRead } from '../query/plan.ts';
import { parseReadRequest } from '../query/read-request.ts';
import { type Resource, resources } from '../resources/registry.ts';
import { WRITE_SHAPES } from '../resources/write-shapes.ts';
import type { RateLimitHooks } from './rate-limits.ts';
import { readResponseHead } from './read-response.ts';

const READ_METHODS = 'GET, HEAD';
const WRITE_METHODS = 'GET, HEAD, POST, PUT, PATCH';

/** The raw query string, undecoded. */
function rawQueryString(request: FastifyRequest): string {
  const url = request.raw.url ?? '';
  const at = url.indexOf('?');
  return at < 0 ? '' : url.slice(at + 1);
}

function readHandler(db: Database, resource: Resource, plannedCounts: boolean) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const head = request.method === 'HEAD';
    const syntax = parseReadRequest({
      queryString: rawQueryString(request),
      rangeHeader: request.headers.range,
      preferHeader: request.headers.prefer,
      acceptHeader: request.headers.accept,
      method: head ? 'HEAD' : 'GET',
    });
    const plan = planRead(resource, syntax);
    const result = await executeRead(db, request.principal, plan, {
      head,
      plannedCounts,
      // The code only: a failure's message can quote a row's value, and personal data stays out of logs.
      onLateError: (error) => request.log.error({ code: (error as { code?: unknown }).code }, 'streaming a page failed; the response was aborted'),
    });
    const { status, headers } = readResponseHead(plan, result);
    reply.code(status).headers(headers);
    return reply.send(head ? undefined : result.body);
  };
}

/** The methods a resource serves; any other method on it is 405 with this Allow. */
function allowedMethods(resource: Resource): string {
  return Object.hasOwn(WRITE_SHAPES, resource.name) ? WRITE_METHODS : READ_METHODS;
}

/** 405 with Allow for a method a resource does not serve; 404 PGRST205 for a name no resource has. */
async function refuseMethod(request: FastifyRequest<{ Params: { resource: string } }>): Promise<never> {
  const name = request.params.resource;
  const resource = resources.find((r) => r.name === name);
  if (resource) {
    const allow = allowedMethods(resource);
    throw apiError('METHOD_NOT_ALLOWED', request.method, allow).withHeaders({ allow });
  }
  throw apiError('PGRST205', name, resources.map((r) => r.name));
}

export function registerReadRoutes(app: FastifyInstance, deps: { db: Database; limits: RateLimitHooks; plannedCounts: boolean }): void {
  for (const resource of resources) {
    app.get(`/${resource.name}`, { preHandler: deps.limits.read }, readHandler(deps.db, resource, deps.plannedCounts));
  }
  // Reached by every method a resource's own routes do not serve, and by unknown resources. The
  // refusal is the route's onRequest hook, so it comes before the body is read or parsed: whatever
  // body and Content-Type came (postgrest-js sends `Content-Type: application/json` and no body
  // with every delete), the answer is 405 or 404. Authentication, a hook of the scope, comes
  // first. The handler, never reached, is the same refusal.
  app.all<{ Params: { resource: string } }>('/:resource', { onRequest: refuseMethod }, refuseMethod);
}
