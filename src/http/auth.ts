/**
 * Bearer-token authentication for the partner API (docs/api.md, Authentication; docs/decisions.md, Errors).
 * Tokens are looked up by hash and never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { apiError } from '../errors.ts';
import type { Principal, TokenAuthenticator } from '../domain/tokens.ts';
import type { AuthFailureGuard } from './rate-limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the bearer token speaks for; set by the partner API's onRequest hook. */
    principal: Principal;
  }
}

function bearerToken(header: string | undefined): string | null {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * An onRequest hook that admits only `Authorization: Bearer <key>` (the operator key, the metrics
 * key); a wrong one counts as a failed authentication. Digests have one length, so the comparison
 * takes the same time whatever was sent.
 */
export function requireStaticKey(key: string, failures: AuthFailureGuard, reason: 'operator' | 'metrics') {
  const expected = digest(key);
  return async (request: FastifyRequest) => {
    await failures.check(request);
    const given = bearerToken(request.headers.authorization);
    if (given === null || !timingSafeEqual(digest(given), expected)) {
      throw apiError('UNAUTHORIZED', reason).withHeaders(await failures.record(request));
    }
  };
}

function authenticatePartner(tokens: TokenAuthenticator, failures: AuthFailureGuard) {
  const refuse = async (request: FastifyRequest, reason: 'missing' | 'malformed' | 'unknown') =>
    apiError('UNAUTHORIZED', reason).withHeaders(await failures.record(request));
  return async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    const token = header === undefined ? null : bearerToken(header);
    if (token === null) {
      await failures.check(request);
      throw await refuse(request, header === undefined ? 'missing' : 'malformed');
    }
    try {
      const principal = await tokens.authenticate(token, (lookup) => failures.check(request, lookup));
      if (!principal) throw await refuse(request, 'unknown');
      request.principal = principal;
    } finally {
      // After the failure is recorded: until then the lookup counts as a failure to be.
      failures.settle(request);
    }
  };
}

/**
 * Every route registered beside this plugin answers only to a known bearer token, and reads
 * `request.principal` (fastify-plugin, so the hook and the decoration reach those siblings).
 */
export const partnerAuth = fp(async (app: FastifyInstance, options: { tokens: TokenAuthenticator; authFailures: AuthFailureGuard }) => {
  // Null until the onRequest hook below has run, which is before any partner route sees it.
  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', authenticatePartner(options.tokens, options.authFailures));
  // last_used_at is noted once the response has gone, so its write never delays one.
  app.addHook('onResponse', async (request) => {
    if (request.principal) options.tokens.recordUse(request.principal.tokenId);
  });
  app.addHook('onClose', () => options.tokens.settled());
}, { name: 'partner-auth' });

/** Writes need a write-enabled token scoped to a single university. */
export async function requireWriteToken(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  const { principal } = request;
  if (principal.consortiumId !== null) {
    throw apiError('WRITE_NOT_ENABLED', 'consortium');
  }
  if (!principal.canWrite) {
    throw apiError('WRITE_NOT_ENABLED', 'read_only');
  }
}
