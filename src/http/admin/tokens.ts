/**
 * Partner tokens on the operator API: issue one for a university or a consortium, revoke one.
 */
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import type { Database } from '../../db/database.ts';
import { type TokenAuthenticator, issueToken, revokeToken } from '../../domain/tokens.ts';
import { apiError } from '../../errors.ts';
import { idParams, optionalText, uuid } from './schemas.ts';

/** A token is scoped to exactly one university or one consortium. */
const tokenBody = Type.Object({
  university_id: Type.Optional(uuid),
  consortium_id: Type.Optional(uuid),
  can_write: Type.Optional(Type.Boolean()),
  expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  label: optionalText,
}, { additionalProperties: false, oneOf: [{ required: ['university_id'] }, { required: ['consortium_id'] }] });

export const tokenRoutes: FastifyPluginAsyncTypebox<{ db: Database; tokens: TokenAuthenticator }> = async (app, { db, tokens }) => {
  app.post('/tokens', { schema: { body: tokenBody } }, async (request, reply) => {
    const input = request.body;
    if (input.consortium_id && input.can_write) {
      throw apiError('INVALID_BODY', 'Consortium tokens are read only: can_write must be false.');
    }
    // Compared with this process's clock, the one that later refuses the expired token.
    if (input.expires_at !== undefined && !(Date.parse(input.expires_at) > Date.now())) {
      throw apiError('INVALID_BODY', `expires_at must be in the future; ${input.expires_at} is not.`);
    }
    reply.code(201);
    return db.asOperator((tx) => issueToken(tx, {
      universityId: input.university_id, consortiumId: input.consortium_id, canWrite: input.can_write,
      expiresAt: input.expires_at, label: input.label,
    }));
  });

  app.delete('/tokens/:id', { schema: { params: idParams } }, async (request, reply) => {
    const { id } = request.params;
    const revoked = await db.asOperator((tx) => revokeToken(tx, id));
    if (!revoked) throw apiError('NOT_FOUND', 'No active token has that id.');
    tokens.forget(id);
    return reply.code(204).send();
  });
};
