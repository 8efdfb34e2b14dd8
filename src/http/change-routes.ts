/**
 * GET /v1/changes and GET /v1/changes/<resource> (students, cohorts): the change feed
 * (src/query/changes.ts, docs/api.md "Change feed"). One path segment more than a resource's, so
 * the feed of a resource never takes a name a resource could have; `changes` itself may be no
 * resource's name. Counts against the read rate limit like a read.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { FEEDS, type Feed, parseChangesRequest, readChanges } from '../query/changes.ts';
import { JSON_CONTENT_TYPE, requireJsonAccept } from '../query/media-types.ts';
import { checkQueryStringLength } from '../query/query-string.ts';
import { rawQueryString } from './read-routes.ts';
import { varyOn } from './response-headers.ts';
import { resourcesByName } from '../resources/registry.ts';

const CHANGES_PATH = 'changes';

/** The URL of a feed under the partner prefix. */
export const feedPath = (feed: Feed): string => (feed === 'all' ? `/${CHANGES_PATH}` : `/${CHANGES_PATH}/${feed}`);

function feedHandler(db: Database, feed: Feed) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    // A cursor of 24 KB was read (and its positions dropped) where any other read is 414.
    checkQueryStringLength(rawQueryString(request));
    // JSON or 406 by Accept.
    varyOn(reply, 'Accept');
    requireJsonAccept(request.headers.accept);
    const changes = parseChangesRequest(feed, request.query as Record<string, unknown>);
    const body = await readChanges(db, request.principal, changes);
    return reply.type(JSON_CONTENT_TYPE).send(request.method === 'HEAD' ? undefined : body);
  };
}

export function registerChangeRoutes(app: FastifyInstance, deps: { db: Database }): void {
  // A resource of this name would be shadowed by the feed (a static route wins over /:resource).
  if (resourcesByName.has(CHANGES_PATH)) throw new Error(`"${CHANGES_PATH}" is the change feed's path; no resource may take that name.`);
  // HEAD declared with GET, not left to Fastify's generated route, which sends `Content-Length: 0`
  // (src/http/read-routes.ts); it reads the window as GET does, so that its status is GET's.
  for (const feed of FEEDS) {
    app.route({ method: ['GET', 'HEAD'], url: feedPath(feed), handler: feedHandler(deps.db, feed) });
  }
}
