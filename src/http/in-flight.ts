/**
 * Requests of one token in progress at once, an instance's count: each holds its answer in memory
 * until its client has read it. 500 requests for whole 1,000-row résumé pages (3.7 MB each) from
 * one token whose client read none took the instance from 1.0 to 1.75 GB, and every other
 * university's requests, /healthz included, waited 6–10 s. Past LIMITS.requestsInFlightPerToken a
 * request is answered 429 TOO_MANY_REQUESTS_IN_FLIGHT; a request is in progress until its
 * response has closed, sent or cut off.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';

/**
 * The onRequest hook that counts a partner's requests in progress (after the token check: it
 * reads `request.principal`); a callback, not an async function, as it awaits nothing.
 */
export function inFlightLimit(): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  const byToken = new Map<string, number>();
  return (request, reply, done) => {
    // A client that left while an earlier hook waited (its token's lookup, say): its response has
    // closed already and says so no more, so counted it would stay in progress for good. 32
    // connections closed at once in a benchmark left 64 such, and the token was refused from then on.
    if (reply.raw.destroyed) return done();
    const { tokenId } = request.principal;
    const held = byToken.get(tokenId) ?? 0;
    if (held >= LIMITS.requestsInFlightPerToken) return done(apiError('TOO_MANY_REQUESTS_IN_FLIGHT'));
    byToken.set(tokenId, held + 1);
    reply.raw.once('close', () => {
      const left = byToken.get(tokenId)! - 1;
      if (left === 0) byToken.delete(tokenId);
      else byToken.set(tokenId, left);
    });
    done();
  };
}
