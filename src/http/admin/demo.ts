/**
 * POST /demo on the operator API: loads the demo data set of a seed with generated students (201),
 * or answers the one loaded already (200); fresh tokens either way.
 */
import { type FastifyPluginAsyncTypebox, type Static, Type } from '@fastify/type-provider-typebox';
import { PostgresError } from 'pg-error-enum';
import type { Database } from '../../db/database.ts';
import { isDatabaseError } from '../../db/store.ts';
import { DEMO_MAX_STUDENTS } from '../../domain/demo-data.ts';
import { loadDemo, loadedDemo } from '../../domain/demo.ts';
import { closedBody } from './schemas.ts';

const demoOptions = closedBody({
  students: Type.Optional(Type.Integer({ minimum: 1, maximum: DEMO_MAX_STUDENTS })),
  seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
});
/**
 * A load may take longer than a request's store wait (6 s by default): 6,000 students loaded in
 * 2.3 s on PostgreSQL, so DEMO_MAX_STUDENTS take over a minute, more on the embedded store.
 */
const DEMO_STORE_WAIT_MS = 15 * 60_000;

/** The options, or no body at all for the defaults. */
const demoBody = Type.Unsafe<Static<typeof demoOptions> | null>({ ...demoOptions, type: ['object', 'null'] });

export const demoRoutes: FastifyPluginAsyncTypebox<{ db: Database }> = async (app, { db }) => {
  app.post('/demo', { schema: { body: demoBody } }, async (request, reply) => {
    const input = request.body ?? {};
    const answer = await db.asOperator(async (tx) => {
      const loaded = await loadedDemo(tx, input.seed);
      return loaded ? { created: false, demo: loaded } : { created: true, demo: await loadDemo(tx, input) };
    }, { storeWaitMs: DEMO_STORE_WAIT_MS }).catch(async (error: unknown) => {
      // Two first calls for one seed both load it; the one whose rows collide answers the other's.
      if (!isDatabaseError(error) || error.code !== PostgresError.UNIQUE_VIOLATION) throw error;
      const loaded = await db.asOperator((tx) => loadedDemo(tx, input.seed));
      if (!loaded) throw error;
      return { created: false, demo: loaded };
    });
    reply.code(answer.created ? 201 : 200);
    return answer.demo;
  });
};
