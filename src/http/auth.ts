/**
 * Bearer-token authentication for the partner API (spec 'Authentication', decisions D3).
 * Tokens are looked up by hash and never logged.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.ts';
import type { Principal, TokenAuthenticator } from '../domain/tokens.ts';
import type { AuthFailureGuard } from './rate-limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

const unauthorized = (message: string) =>
  new ApiError(401, 'UNAUTHORIZED', message, null, 'Send Authorization: Bearer <token> with a token issued by the operator.',
    { 'www-authenticate': 'Bearer' });

export function bearerToken(header: string | undefined): string | null {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

export function authenticatePartner(tokens: TokenAuthenticator, failures: AuthFailureGuard) {
  const refuse = async (request: FastifyRequest, message: string) => {
    await failures.record(request);
    return unauthorized(message);
  };
  return async (request: FastifyRequest) => {
    await failures.check(request);
    const header = request.headers.authorization;
    if (header === undefined) throw await refuse(request, 'The request carries no bearer token.');
    const token = bearerToken(header);
    if (token === null) throw await refuse(request, 'The Authorization header is not of the form "Bearer <token>".');
    const principal = await tokens.authenticate(token);
    if (!principal) throw await refuse(request, 'The bearer token is unknown, revoked or expired.');
    request.principal = principal;
  };
}

/** Writes need a write-enabled token scoped to a single university. */
export async function requireWriteToken(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  const { principal } = request;
  if (principal.consortiumId !== null) {
    throw new ApiError(403, 'WRITE_NOT_ENABLED', 'Consortium tokens can only read.', null,
      'Write with a write-enabled token of a single university.');
  }
  if (!principal.canWrite) {
    throw new ApiError(403, 'WRITE_NOT_ENABLED', 'This token is not enabled for writing.', null,
      'Ask the operator for a write-enabled token of your university.');
  }
}
