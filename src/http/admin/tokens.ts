/**
 * Partner tokens on the operator API: issue one for a university or a consortium, rotate one,
 * revoke one. Listing and reading them is src/http/admin/records.ts's.
 */
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import type { Database } from '../../db/database.ts';
import { type TokenAuthenticator, issueToken, revokeToken, rotateToken } from '../../domain/tokens.ts';
import { apiError } from '../../errors.ts';
import { LIMITS, OPERATOR_DEFAULTS } from '../../limits.ts';
import { recordSchema } from './records.ts';
import { nullable, uuid } from '../schemas.ts';
import { closedBody, idParams, noBody, optionalBody, optionalText } from './schemas.ts';

/** When the token stops working; absent or null, it does not expire (as a record shows it). */
const expiresAt = Type.Optional(nullable(Type.String({ format: 'date-time' })));

/** A token is scoped to exactly one university or one consortium. */
const tokenBody = Type.Object({
  university_id: Type.Optional(uuid),
  consortium_id: Type.Optional(uuid),
  can_write: Type.Optional(Type.Boolean()),
  expires_at: expiresAt,
  label: optionalText,
}, { additionalProperties: false, oneOf: [{ required: ['university_id'] }, { required: ['consortium_id'] }] });

const rotateOptions = closedBody({
  grace_seconds: Type.Optional(Type.Integer({
    minimum: 0, maximum: LIMITS.rotationGraceSeconds, default: OPERATOR_DEFAULTS.rotationGraceSeconds,
    description: 'How long the old token keeps working beside the new one; never longer than it already would.',
  })),
  expires_at: expiresAt,
});
/** The options, or no body at all for the defaults. */
const rotateBody = optionalBody(rotateOptions);

/** The token record and, this once, its secret. */
const issuedToken = Type.Object({ ...recordSchema('tokens').properties, token: Type.String() }, { additionalProperties: false });

/**
 * The last instant an expiry may name: RFC 3339 stops at year 9999, and so does the ISO text of
 * the instant sent to PostgreSQL (`9999-12-31T23:59:59-00:01` became `+010000-01-01T…`, which
 * PostgreSQL refused 400 `22009`).
 */
const LATEST_EXPIRY = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * The expiry as the instant in UTC that is stored, compared with this process's clock, the one
 * that later refuses the expired token. RFC 3339 offsets reach ±23:59 and PostgreSQL's ±15:59:
 * `+23:59` was stored as sent and refused 400 `22009`.
 */
function futureInstant(expires: string | null | undefined): string | undefined {
  if (expires === undefined || expires === null) return undefined;
  const at = Date.parse(expires);
  // The schema's date-time takes a leap second (23:59:60), which JavaScript's clock cannot read.
  if (Number.isNaN(at)) {
    throw apiError('INVALID_BODY', `expires_at must be a time this service's clock can read; ${expires} is not (a leap second?).`);
  }
  if (at <= Date.now()) {
    throw apiError('INVALID_BODY', `expires_at must be in the future; ${expires} is not.`);
  }
  if (at > LATEST_EXPIRY) {
    throw apiError('INVALID_BODY', `expires_at must be within year 9999 in UTC; ${expires} is not.`);
  }
  return new Date(at).toISOString();
}

export const tokenRoutes: FastifyPluginAsyncTypebox<{ db: Database; tokens: TokenAuthenticator }> = async (app, { db, tokens }) => {
  app.post('/tokens', { schema: { body: tokenBody, response: { 201: issuedToken } } }, async (request, reply) => {
    const input = request.body;
    if (input.consortium_id && input.can_write) {
      throw apiError('INVALID_BODY', 'Consortium tokens are read only: can_write must be false.');
    }
    const expiresAt = futureInstant(input.expires_at);
    reply.code(201);
    return db.asOperator((tx) => issueToken(tx, {
      universityId: input.university_id, consortiumId: input.consortium_id, canWrite: input.can_write, expiresAt, label: input.label,
    }));
  });

  app.post('/tokens/:id/rotate', {
    schema: { params: idParams, body: rotateBody, response: { 201: issuedToken } },
  }, async (request, reply) => {
    const { grace_seconds: graceSeconds = OPERATOR_DEFAULTS.rotationGraceSeconds, expires_at: expires } = request.body ?? {};
    const expiresAt = futureInstant(expires);
    const issued = await db.asOperator((tx) => rotateToken(tx, request.params.id, { graceSeconds, expiresAt }));
    if (!issued) throw apiError('NOT_FOUND', 'No token has that id.');
    // The old token's new expiry applies to its next request here, not after the cache time.
    tokens.forget(request.params.id);
    reply.code(201);
    return issued;
  });

  app.delete('/tokens/:id', { schema: { params: idParams, body: noBody } }, async (request, reply) => {
    const { id } = request.params;
    const revoked = await db.asOperator((tx) => revokeToken(tx, id));
    if (!revoked) throw apiError('NOT_FOUND', 'No token has that id.');
    tokens.forget(id);
    return reply.code(204).send();
  });
};
