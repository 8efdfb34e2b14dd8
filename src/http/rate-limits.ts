/**
 * Rate limits (docs/decisions.md, Tokens and limits): reads 600 a minute per source IP across every read (the resources, /v1/me and the change feed),
 * writes 60 a minute per token, and failed authentications per source IP. Counting is
 * @fastify/rate-limit's, in memory or, with REDIS_URL, shared through Redis by
 * src/http/shared-counts.ts; the headers and the 429 body are the service's own. While Redis is
 * unreachable the limits fail open.
 */
import rateLimit, { type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Redis, ReplyError } from 'ioredis';
import { SettingRefused } from '../config.ts';
import { apiError } from '../errors.ts';
import { type RateLimitKind, notesOf } from './request-notes.ts';
import { SharedCounts, failingFast, redisCountServer } from './shared-counts.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The hooks that count reads, writes and failed authentications. */
    rateLimits: RateLimitHooks;
  }
}

export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** Failed authentications count against the source IP before any token or key is looked up. */
export interface AuthFailureGuard {
  /**
   * 429 once the source IP has used up its failures for the window, counting the distinct
   * tokens it has being looked up in the store as failures to be. A `lookup` (a token's hash) is
   * then under way for the request until `settle`.
   */
  check(request: FastifyRequest, lookup?: string | null): Promise<void>;
  /** Ends the request's lookup under way, once its failure (if any) is recorded. */
  settle(request: FastifyRequest): void;
  /** Counts one failed authentication of the source IP; answers that limit's headers, which the 401 carries. */
  record(request: FastifyRequest): Promise<Record<string, string>>;
}

export interface RateLimitHooks {
  read: RateLimitHook;
  write: RateLimitHook;
  authFailures: AuthFailureGuard;
}

const WINDOW_MS = 60_000;

/**
 * The headers a counted request's answer carries; 429 adds Retry-After. In the case the
 * OpenAPI description and CORS show them (HTTP header names are case-insensitive).
 */
export const RATE_LIMIT_HEADERS = { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' } as const;

/**
 * Redis is asked with no queue, so a stopped Redis costs a request nothing, and with a deadline,
 * so a stalled one costs a request at most this, and only a few requests (failingFast in
 * src/http/shared-counts.ts says which). A command to a reachable Redis takes under 1 ms; the margin is for
 * a busy event loop (embedded PGlite runs on it), where a late answer would only let one request
 * through unlimited.
 */
const REDIS_COMMAND_TIMEOUT_MS = 250;
/** After a failed question, Redis is asked again after this long, by one request. */
const REDIS_RETRY_MS = 500;
/** Reconnection is retried with backoff up to this, so limits return within it and REDIS_RETRY_MS. */
const REDIS_MAX_RECONNECT_DELAY_MS = 1_000;
const REDIS_CONNECT_TIMEOUT_MS = 1_000;

/** The headers of a counted request: its limit, what remains of it, and when its window ends. */
const limitHeaders = (state: { max: number; remaining: number; ttlInSeconds: number }): Record<string, string> => ({
  [RATE_LIMIT_HEADERS.limit]: String(state.max), [RATE_LIMIT_HEADERS.remaining]: String(state.remaining),
  [RATE_LIMIT_HEADERS.reset]: String(Math.max(0, state.ttlInSeconds)),
});

/** A 429 carries the limit that refused it, with nothing remaining, and Retry-After. */
function rateLimited(request: FastifyRequest, kind: RateLimitKind, max: number, reset: string) {
  notesOf(request).rateLimited = kind;
  const what = kind === 'auth_failure' ? 'failed authentications' : 'requests';
  return apiError('RATE_LIMITED', max, reset, what)
    .withHeaders({ ...limitHeaders({ max, remaining: 0, ttlInSeconds: Number(reset) }), 'retry-after': reset });
}

/** A Redis connection, and the last error its connection met (a refusal, a timeout, a failed login). */
function connectRedis(url: string): { redis: Redis; lastConnectionError: () => string | undefined } {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 100, REDIS_MAX_RECONNECT_DELAY_MS),
  });
  // The connection's errors repeat at every failed reconnect; the counts' failures are what the
  // log reports (sharedCounts), once per outage, with the last of these as its cause. Without a
  // listener ioredis writes each to stderr.
  let last: string | undefined;
  redis.on('error', (error: Error) => { last = error.message; });
  redis.on('ready', () => { last = undefined; });
  return { redis, lastConnectionError: () => last };
}

/**
 * One log line when the counts cannot reach Redis, naming why (the count's own error said only
 * that no command could be sent), and one when they can again.
 */
function logAvailability(app: FastifyInstance, lastConnectionError: () => string | undefined) {
  return (available: boolean, error?: Error) => {
    if (available) app.log.info('rate-limit store available again; limits enforced');
    else app.log.warn({ error: error?.message, cause: lastConnectionError() }, 'rate-limit store unavailable; limits fail open until it returns');
  };
}

export interface RateLimitSettings {
  readLimitPerMin: number;
  writeLimitPerMin: number;
  authFailureLimitPerMin: number;
  redisUrl?: string;
}

/** Where the counts of several instances meet in Redis. */
const REDIS_KEY_PREFIX = 'pds-rate-limit:';

/**
 * The store of the counts shared through Redis when REDIS_URL is set (@fastify/rate-limit makes
 * it with `new`); without one, counters are in memory.
 */
async function sharedCounts(app: FastifyInstance, redisUrl: string | undefined): Promise<FastifyRateLimitStoreCtor | undefined> {
  if (!redisUrl) return undefined;
  const { redis, lastConnectionError } = connectRedis(redisUrl);
  const server = failingFast(redisCountServer(redis, REDIS_KEY_PREFIX), REDIS_RETRY_MS, logAvailability(app, lastConnectionError));
  // The plugin makes its one store itself; the instance is kept to stop its syncing on close.
  let made: SharedCounts | undefined;
  class RedisCounts extends SharedCounts {
    constructor() {
      super(server);
      made = this;
    }
  }
  app.addHook('onClose', async () => {
    made?.close();
    redis.disconnect();
  });
  // Commands are not queued, so requests served before the connection is up would go
  // uncounted: the start waits for it, but not past a refused connection or the connect timeout.
  // A command the server refuses (the database's SELECT, sent before the connection is ready)
  // does not end the wait.
  await new Promise<void>((resolve) => {
    const connectionFailed = (error: Error) => {
      if (!(error instanceof ReplyError)) done();
    };
    const done = () => {
      redis.off('ready', done).off('error', connectionFailed);
      resolve();
    };
    redis.once('ready', done).on('error', connectionFailed);
    setTimeout(done, REDIS_CONNECT_TIMEOUT_MS).unref();
  });
  await checkDatabase(redis);
  return RedisCounts;
}

/**
 * The database REDIS_URL names, selected again once Redis answers: a server that refuses it
 * (`/99` of 16 databases) refuses the start. ioredis kept the connection on database 0 and said
 * nothing, so the counts mixed with whatever else uses it.
 */
async function checkDatabase(redis: Redis): Promise<void> {
  const database = Number(redis.options.db ?? 0);
  if (redis.status !== 'ready' || database === 0) return;
  try {
    await redis.select(database);
  } catch (error) {
    redis.disconnect();
    throw new SettingRefused(`REDIS_URL names database ${database}, which the Redis server refuses (${(error as Error).message})`);
  }
}

/**
 * Decorates the instance with `rateLimits` (fastify-plugin, so the partner and operator APIs
 * registered beside it share one set of counters).
 */
export const rateLimits = fp(async (app: FastifyInstance, settings: RateLimitSettings) => {
  const store = await sharedCounts(app, settings.redisUrl);
  await app.register(rateLimit, { global: false, ...(store ? { store } : {}), skipOnError: true });

  const hook = (kind: RateLimitKind, max: number, keyOf: (request: FastifyRequest) => string): RateLimitHook => {
    const limiter = app.createRateLimit({ max, timeWindow: WINDOW_MS, keyGenerator: keyOf });
    return async (request, reply) => {
      const state = await limiter(request);
      if (state.isAllowed) return;
      reply.headers(limitHeaders(state));
      if (state.isExceeded) throw rateLimited(request, kind, state.max, String(Math.max(0, state.ttlInSeconds)));
    };
  };

  const failures = app.createRateLimit({
    max: settings.authFailureLimitPerMin, timeWindow: WINDOW_MS, keyGenerator: (request) => `auth-failure:${request.ip}`,
  });
  // Per source IP, the store lookups between their check and their outcome (by token hash, so
  // the requests sharing one lookup count once). Counting only outcomes let a burst past the
  // limit: 60 unknown tokens sent at once with a limit of 10 made 11 lookups.
  const lookupsUnderWay = new Map<string, Map<string, number>>();
  const settlements = new WeakMap<FastifyRequest, () => void>();
  const authFailures: AuthFailureGuard = {
    async check(request, lookup = null) {
      const state = await failures(request, { increment: false });
      const source = request.ip;
      let lookups = lookupsUnderWay.get(source);
      if (!state.isAllowed && state.remaining - (lookups?.size ?? 0) <= 0) {
        throw rateLimited(request, 'auth_failure', state.max, String(Math.max(1, state.ttlInSeconds)));
      }
      if (lookup === null) return;
      if (!lookups) lookupsUnderWay.set(source, lookups = new Map());
      lookups.set(lookup, (lookups.get(lookup) ?? 0) + 1);
      const underWay = lookups;
      settlements.set(request, () => {
        const left = underWay.get(lookup)! - 1;
        if (left > 0) underWay.set(lookup, left);
        else if (underWay.delete(lookup) && underWay.size === 0) lookupsUnderWay.delete(source);
      });
    },
    settle(request) {
      settlements.get(request)?.();
      settlements.delete(request);
    },
    async record(request) {
      const state = await failures(request);
      // isAllowed: a key of the allow list, which is not counted (none is configured).
      return state.isAllowed ? {} : limitHeaders(state);
    },
  };

  app.decorate('rateLimits', {
    read: hook('read', settings.readLimitPerMin, (request) => `read:${request.ip}`),
    write: hook('write', settings.writeLimitPerMin, (request) => `write:${request.principal.tokenId}`),
    authFailures,
  });
}, { name: 'rate-limits' });
