/**
 * The platform app's student events, stood in for by the operator API: sign-in, a graduation
 * date set in the app, a verified email, erasure, and the alumni history they leave. They call
 * the same domain functions partner writes use.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Database } from '../../db/database.ts';
import { alumniHistory, eraseStudent, setGraduationDateInApp, signIn, verifyEmail } from '../../domain/student-events.ts';
import { nullable } from '../schemas.ts';
import { closedBody, date, email, idParams, noBody } from './schemas.ts';

const graduationDateBody = closedBody({ graduation_date: nullable(date) });
const verifiedEmailBody = closedBody({ email });

export const studentRoutes: FastifyPluginAsyncTypebox<{ db: Database }> = async (app, { db }) => {
  app.post('/students/:id/sign-in', { schema: { params: idParams, body: noBody } }, async (request) => {
    await signIn(db, request.params.id);
    return alumniHistory(db, request.params.id);
  });

  app.post('/students/:id/graduation-date', {
    schema: { params: idParams, body: graduationDateBody },
  }, async (request) => {
    await setGraduationDateInApp(db, request.params.id, request.body.graduation_date);
    return alumniHistory(db, request.params.id);
  });

  app.post('/students/:id/verify-email', {
    schema: { params: idParams, body: verifiedEmailBody },
  }, async (request) => verifyEmail(db, request.params.id, request.body.email));

  app.delete('/students/:id', { schema: { params: idParams, body: noBody } }, async (request, reply) => {
    await eraseStudent(db, request.params.id);
    return reply.code(204).send();
  });

  app.get('/students/:id/alumni-history', { schema: { params: idParams } }, async (request) =>
    alumniHistory(db, request.params.id));
};
