/**
 * Onboarding a university on the operator API: consortia, universities, campuses, resume
 * templates, staff and self-serve accounts, and cohorts made the way the platform's app makes them.
 */
import { type FastifyPluginAsyncTypebox, Type } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import type { Database } from '../../db/database.ts';
import type { Queryable, Row } from '../../db/store.ts';
import type { TokenAuthenticator } from '../../domain/tokens.ts';
import {
  OPERATOR_ACCOUNT_KINDS, createAccount, createCampus, createCohortInApp, createConsortium, createResumeTemplate, createUniversity,
} from '../../domain/onboarding.ts';
import { buildRowByIdStatement } from '../../query/sql.ts';
import { resourcesByName } from '../../resources/registry.ts';
import { wholeRowSchema } from '../openapi/components.ts';
import { cohortCreateBody } from '../write-schemas.ts';
import { recordSchema } from './records.ts';
import { nullable, uuid } from '../schemas.ts';
import { closedBody, email, name, optionalText } from './schemas.ts';

const consortiumBody = closedBody({ name });
const universityBody = closedBody({
  name, short_name: optionalText, consortium_id: Type.Optional(nullable(uuid)), country: optionalText, timezone: optionalText,
});
const campusBody = closedBody({ university_id: uuid, name, city: optionalText, country: optionalText });
const resumeTemplateBody = closedBody({ university_id: uuid, name });
const accountBody = closedBody({
  email, kind: Type.Enum(OPERATOR_ACCOUNT_KINDS), university_id: Type.Optional(nullable(uuid)),
});

export const onboardingRoutes: FastifyPluginAsyncTypebox<{ db: Database; tokens: TokenAuthenticator }> = async (app, { db, tokens }) => {
  /** A handler that creates one record from the body, as the operator, and answers 201 with it. */
  const creates = <Body>(create: (tx: Queryable, body: Body) => Promise<Row>) =>
    async (request: { body: Body }, reply: FastifyReply) => {
      reply.code(201);
      return db.asOperator((tx) => create(tx, request.body));
    };

  app.post('/consortia', { schema: { body: consortiumBody, response: { 201: recordSchema('consortia') } } }, creates(createConsortium));
  app.post('/universities', { schema: { body: universityBody, response: { 201: recordSchema('universities') } } }, async (request, reply) => {
    const university = await creates(createUniversity)(request, reply);
    // The consortium's tokens read the new member from their next request here, not after the cache time.
    if (request.body.consortium_id) tokens.forgetConsortium(request.body.consortium_id);
    return university;
  });
  app.post('/campuses', { schema: { body: campusBody, response: { 201: recordSchema('campuses') } } }, creates(createCampus));
  app.post('/resume-templates', {
    schema: { body: resumeTemplateBody, response: { 201: recordSchema('resume-templates') } },
  }, creates(createResumeTemplate));
  app.post('/accounts', { schema: { body: accountBody, response: { 201: recordSchema('accounts') } } }, creates(createAccount));
  // The cohort as a partner's read of it answers it (every column, campus_name and student_count
  // included), not a list of the operator's own.
  const cohorts = resourcesByName.get('cohorts')!;
  const cohortRow = Type.Unsafe<Row>(wholeRowSchema(cohorts));
  app.post('/cohorts', { schema: { body: cohortCreateBody(), response: { 201: cohortRow } } }, async (request, reply) => {
    reply.code(201);
    return db.asOperator(async (tx) => {
      const { text, params } = buildRowByIdStatement(cohorts, request.body.university_id, await createCohortInApp(tx, request.body));
      const [{ row }] = await tx.query<{ row: string }>(text, params);
      return JSON.parse(row) as Row;
    });
  });
};
