/**
 * Bearer-token authentication for the partner API (spec 'Authentication', decisions D3).
 * Tokens are looked up by hash and never logged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { apiError } from '../errors.ts';
import type { Principal, TokenAuthenticator } from '../domain/tokens.ts';
import type { AuthFailureGuard } from './rate-limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}


export function bearerToken(header: string | undefined): string | null {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

export function authenticatePartner(tokens: TokenAuthenticator, failures: AuthFailureGuard) {
  const refuse = async (request: FastifyRequest, reason: 'missing' | 'malformed' | 'unknown') => {
    await failures.record(request);
    return apiError('UNAUTHORIZED', reason);
  };
  return async (request: FastifyRequest) => {
    await failures.check(request);
    const header = request.headers.authorization;
    if (header === undefined) throw await refuse(request, 'missing');
    const token = bearerToken(header);
    if (token === null) throw await refuse(request, 'malformed');
    const principal = await tokens.authenticate(token);
    if (!principal) throw await refuse(request, 'unknown');
    request.principal = principal;
  };
}

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
