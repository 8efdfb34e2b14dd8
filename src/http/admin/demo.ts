/**
 * POST /demo on the operator API: loads a demo university with generated students, once per seed.
 */
import { type FastifyPluginAsyncTypebox, type Static, Type } from '@fastify/type-provider-typebox';
import type { Database } from '../../db/database.ts';
import { DEMO_MAX_STUDENTS, demoExists } from '../../db/demo-data.ts';
import { loadDemo } from '../../domain/demo.ts';
import { apiError } from '../../errors.ts';
import { closedBody } from './schemas.ts';

const demoOptions = closedBody({
  students: Type.Optional(Type.Integer({ minimum: 1, maximum: DEMO_MAX_STUDENTS })),
  seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
});
/** The options, or no body at all for the defaults. */
const demoBody = Type.Unsafe<Static<typeof demoOptions> | null>({ ...demoOptions, type: ['object', 'null'] });

export const demoRoutes: FastifyPluginAsyncTypebox<{ db: Database }> = async (app, { db }) => {
  app.post('/demo', { schema: { body: demoBody } }, async (request, reply) => {
    const input = request.body ?? {};
    const result = await db.asOperator(async (tx) => {
      if (await demoExists(tx, input.seed)) throw apiError('DEMO_EXISTS');
      return loadDemo(tx, input);
    });
    reply.code(201);
    return result;
  });
};
