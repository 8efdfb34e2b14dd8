/**
 * Rate limits (decisions D6): reads 600 a minute per source IP across every list endpoint,
 * writes 60 a minute per token. Counting is @fastify/rate-limit's, in memory or, with
 * REDIS_URL, shared through Redis; the headers and the 429 body are the service's own.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { ApiError } from '../errors.ts';

export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

export interface RateLimitHooks {
  read: RateLimitHook;
  write: RateLimitHook;
}

const WINDOW_MS = 60_000;

export async function registerRateLimits(
  app: FastifyInstance,
  settings: { readLimitPerMin: number; writeLimitPerMin: number; redisUrl?: string },
): Promise<RateLimitHooks> {
  const redis = settings.redisUrl ? new Redis(settings.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 }) : undefined;
  if (redis) app.addHook('onClose', async () => void (await redis.quit()));
  await app.register(rateLimit, { global: false, redis, nameSpace: 'pds-rate-limit:', skipOnError: true });

  const hook = (max: number, keyOf: (request: FastifyRequest) => string): RateLimitHook => {
    const limiter = app.createRateLimit({ max, timeWindow: WINDOW_MS, keyGenerator: keyOf });
    return async (request, reply) => {
      const state = await limiter(request);
      if (state.isAllowed) return;
      const reset = String(Math.max(0, state.ttlInSeconds));
      reply.headers({ 'ratelimit-limit': String(state.max), 'ratelimit-remaining': String(state.remaining), 'ratelimit-reset': reset });
      if (state.isExceeded) {
        throw new ApiError(429, 'RATE_LIMITED', `Rate limit of ${state.max} requests per minute exceeded.`, null,
          `Retry after ${reset} seconds, with backoff.`, { 'retry-after': reset });
      }
    };
  };
  return {
    read: hook(settings.readLimitPerMin, (request) => `read:${request.ip}`),
    write: hook(settings.writeLimitPerMin, (request) => `write:${request.principal.tokenId}`),
  };
}
