/**
 * Every path the service serves answers a method it does not serve with 405 and `Allow`, and a
 * path nothing serves is 404, both before the body is read (docs/decisions.md, "HTTP: methods,
 * media types, browsers"). The methods of a path are the routes': an onRoute hook copies each
 * route into a find-my-way router (the router Fastify itself routes with, so a path matches the
 * same routes in both), and `Allow` lists the methods that router finds for the path.
 *
 * A scope whose onRequest hooks check the caller (the partner API's token) refuses its paths'
 * methods after that check, as PostgREST checks its JWT first: it registers `methodFallback`, a
 * route for every method of its paths that answers 405 or its own 404 once the scope's hooks
 * have run. Everywhere else (the probes, /metrics, /docs, /v1/openapi.json, the operator API)
 * the root's onRequest hook answers at once.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, apiError } from '../errors.ts';
import { answerDetached } from './edge.ts';
import { endpointNotFound } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on a `methodFallback` route: it serves no method, it refuses them. */
    methodFallback?: true;
  }
  interface FastifyInstance {
    /** The methods each path is routed with (`methodRouting`). */
    routedMethods: RoutedMethods;
  }
}

/** The methods that write, as PostgREST reads them (Content-Profile) and as the rate limits count them; every other method reads. */
export const WRITING_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The order `Allow` lists methods in; any other method comes after these, alphabetically. */
const ALLOW_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

const allowRank = (method: string) => {
  const rank = ALLOW_ORDER.indexOf(method);
  return rank < 0 ? ALLOW_ORDER.length : rank;
};

/** Decorates a scope whose routes' unserved methods its `methodFallback` refuses, after its caller check. */
const REFUSED_BY_FALLBACK = Symbol('methods refused by the scope\'s fallback');

interface ServedRoute {
  /** The route's scope refuses the other methods itself, after checking the caller. */
  readonly refusedByFallback: boolean;
  /** The route's template, with its prefix. */
  readonly url: string;
}

interface PathMethods {
  /** The methods routed on the path, in `Allow` order. */
  readonly allow: readonly string[];
  readonly refusedByFallback: boolean;
  /** The template the path is routed by, when any method routes it. */
  readonly template: string | null;
}

/** A copy of the routing table that answers "which methods does this path serve". */
class RoutedMethods {
  private readonly router = FindMyWay();

  constructor(private readonly methods: readonly string[]) {}

  add(route: RouteOptions, scope: FastifyInstance): void {
    if (route.config?.methodFallback) return;
    const store: ServedRoute = { refusedByFallback: scope.hasDecorator(REFUSED_BY_FALLBACK), url: route.url };
    for (const method of [route.method].flat() as HTTPMethod[]) {
      if (!this.router.hasRoute(method, route.url)) this.router.on(method, route.url, () => {}, store);
    }
  }

  serves(method: string, url: string): boolean {
    return this.router.find(method as HTTPMethod, url) !== null;
  }

  of(url: string): PathMethods {
    const found = this.methods.flatMap((method) => {
      const route = this.router.find(method as HTTPMethod, url);
      return route ? [{ method, store: route.store as ServedRoute }] : [];
    });
    return {
      allow: found.map((f) => f.method).sort((a, b) => allowRank(a) - allowRank(b) || a.localeCompare(b)),
      refusedByFallback: found.some((f) => f.store.refusedByFallback),
      template: found[0]?.store.url ?? null,
    };
  }
}

function methodNotAllowed(method: string, allow: readonly string[]): ApiError {
  const listed = allow.join(', ');
  return apiError('METHOD_NOT_ALLOWED', method, listed).withHeaders({ allow: listed });
}

/**
 * Registered at the root after the CORS hook (a preflight is answered before it) and before any
 * route. @fastify/cors's route for OPTIONS on every path, registered before, is not copied: it
 * only lets preflights reach their hook, and a bare OPTIONS is refused here like any method.
 */
export const methodRouting = fp(async (app: FastifyInstance) => {
  const routed = new RoutedMethods(app.supportedMethods);
  app.decorate('routedMethods', routed);
  app.addHook('onRoute', function copyRoute(this: FastifyInstance, route) {
    routed.add(route, this);
  });
  // Node hands a CONNECT to no route but to this event, with the bare socket, and left alone
  // closed it unanswered: the service is no proxy, and a path it serves answers 405 with its
  // methods, as for any method it lacks.
  app.server.on('connect', (request: IncomingMessage, socket: Socket) => {
    const target = request.url ?? '';
    const { allow } = target.startsWith('/') ? routed.of(target) : { allow: [] };
    const answer = allow.length > 0 ? methodNotAllowed('CONNECT', allow) : endpointNotFound('CONNECT', target);
    app.log.info({ code: answer.code, method: 'CONNECT' }, 'client error');
    answerDetached(socket, answer);
  });
  app.addHook('onRequest', async (request) => {
    if (routed.serves(request.method, request.url)) return;
    const onFallback = request.routeOptions.config.methodFallback === true;
    const path = routed.of(request.url);
    if (onFallback && path.refusedByFallback) return;
    if (path.allow.length > 0) throw methodNotAllowed(request.method, path.allow);
    // A path no route serves is 404 before its body is read: a broken body there is not the news.
    if (!onFallback) throw endpointNotFound(request.method, request.url);
  });
}, { name: 'method-routing' });

/**
 * In a scope that checks the caller in its onRequest hooks: a route at each fallback's `url`
 * (relative to the scope's prefix) for every method, whose own onRequest hook runs after the
 * scope's and answers 405 with `Allow` for a path the scope serves with other methods, else the
 * fallback's 404. Its handler, never reached, is the same refusal. fastify-plugin, so that the
 * scope itself is marked.
 */
export const methodFallback = fp(async (app: FastifyInstance, options: {
  fallbacks: readonly { readonly url: string; readonly notFound: (request: FastifyRequest) => ApiError }[];
}) => {
  app.decorate(REFUSED_BY_FALLBACK, true);
  for (const { url, notFound } of options.fallbacks) {
    const refuse = async (request: FastifyRequest): Promise<never> => {
      const { allow } = app.routedMethods.of(request.url);
      throw allow.length > 0 ? methodNotAllowed(request.method, allow) : notFound(request);
    };
    app.route({ method: app.supportedMethods, url, config: { methodFallback: true }, onRequest: refuse, handler: refuse });
  }
}, { dependencies: ['method-routing'] });
