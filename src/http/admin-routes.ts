/**
 * The operator API under /admin/v1 (decisions D7), enabled by PDS_ADMIN_KEY. It onboards
 * universities and stands in for the platform's own app; the app events call the same domain
 * functions partner writes use.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import { DEMO_MAX_STUDENTS, demoExists } from '../db/demo-data.ts';
import { loadDemo } from '../domain/demo.ts';
import {
  createAccount, createCampus, createCohortInApp, createConsortium, createResumeTemplate, createUniversity,
} from '../domain/onboarding.ts';
import { alumniHistory, eraseStudent, setGraduationDateInApp, signIn, verifyEmail } from '../domain/student-events.ts';
import { MAX_EMAIL_LENGTH, MAX_NAME_LENGTH, NO_CONTROL_CHARACTERS_PATTERN } from '../resources/text.ts';
import { type TokenAuthenticator, issueToken, revokeToken } from '../domain/tokens.ts';
import { apiError } from '../errors.ts';
import { bearerToken } from './auth.ts';
import { cohortCreateBody } from './write-schemas.ts';
import type { AuthFailureGuard } from './rate-limits.ts';

const uuid = { type: 'string', format: 'uuid' } as const;
const singleLine = { type: 'string', maxLength: MAX_NAME_LENGTH, pattern: NO_CONTROL_CHARACTERS_PATTERN } as const;
const name = { ...singleLine, minLength: 1 } as const;
const optionalText = { ...singleLine, type: ['string', 'null'] } as const;
const email = { type: 'string', format: 'email', maxLength: MAX_EMAIL_LENGTH } as const;
const date = { type: 'string', format: 'date' } as const;
const idParams = { type: 'object', required: ['id'], properties: { id: uuid } } as const;

function body(required: string[], properties: Record<string, unknown>) {
  return { type: 'object', required, additionalProperties: false, properties };
}

const digest = (value: string) => createHash('sha256').update(value).digest();

function requireAdminKey(adminKey: string | undefined, failures: AuthFailureGuard) {
  const expected = adminKey === undefined ? null : digest(adminKey);
  return async (request: FastifyRequest) => {
    if (expected === null) throw apiError('NOT_FOUND', 'The operator API is disabled: PDS_ADMIN_KEY is not set.');
    await failures.check(request);
    const given = bearerToken(request.headers.authorization);
    if (given === null || !timingSafeEqual(digest(given), expected)) {
      await failures.record(request);
      throw apiError('UNAUTHORIZED', 'operator');
    }
  };
}

export async function adminRoutes(app: FastifyInstance, deps: { db: Database; tokens: TokenAuthenticator; authFailures: AuthFailureGuard; adminKey?: string }) {
  const { db } = deps;
  app.addHook('onRequest', requireAdminKey(deps.adminKey, deps.authFailures));
  const hidden = { hide: true };

  app.post('/consortia', { schema: { ...hidden, body: body(['name'], { name }) } }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createConsortium(tx, request.body as { name: string }));
  });

  app.post('/universities', {
    schema: { ...hidden, body: body(['name'], { name, short_name: optionalText, consortium_id: { ...uuid, nullable: true }, country: optionalText, timezone: optionalText }) },
  }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createUniversity(tx, request.body as Parameters<typeof createUniversity>[1]));
  });

  app.post('/campuses', {
    schema: { ...hidden, body: body(['university_id', 'name'], { university_id: uuid, name, city: optionalText, country: optionalText }) },
  }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createCampus(tx, request.body as Parameters<typeof createCampus>[1]));
  });

  app.post('/resume-templates', {
    schema: { ...hidden, body: body(['university_id', 'name'], { university_id: uuid, name }) },
  }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createResumeTemplate(tx, request.body as Parameters<typeof createResumeTemplate>[1]));
  });

  app.post('/tokens', {
    schema: {
      ...hidden,
      body: {
        type: 'object', additionalProperties: false,
        properties: {
          university_id: uuid, consortium_id: uuid, can_write: { type: 'boolean' },
          expires_at: { type: 'string', format: 'date-time' }, label: optionalText,
        },
        oneOf: [{ required: ['university_id'] }, { required: ['consortium_id'] }],
      },
    },
  }, async (request, reply) => {
    const input = request.body as { university_id?: string; consortium_id?: string; can_write?: boolean; expires_at?: string; label?: string };
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

  app.delete('/tokens/:id', { schema: { ...hidden, params: idParams } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const revoked = await db.asOperator((tx) => revokeToken(tx, id));
    if (!revoked) throw apiError('NOT_FOUND', 'No active token has that id.');
    deps.tokens.forget(id);
    return reply.code(204).send();
  });

  app.post('/accounts', {
    schema: {
      ...hidden,
      body: body(['email', 'kind'], { email, kind: { enum: ['staff', 'self_serve'] }, university_id: { ...uuid, nullable: true } }),
    },
  }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createAccount(tx, request.body as Parameters<typeof createAccount>[1]));
  });

  app.withTypeProvider<TypeBoxTypeProvider>().post('/cohorts', { schema: { ...hidden, body: cohortCreateBody() } }, async (request, reply) => {
    reply.code(201);
    return db.asOperator((tx) => createCohortInApp(tx, request.body));
  });

  const studentId = (request: FastifyRequest) => (request.params as { id: string }).id;

  app.post('/students/:id/sign-in', { schema: { ...hidden, params: idParams } }, async (request) => {
    await signIn(db, studentId(request));
    return alumniHistory(db, studentId(request));
  });

  app.post('/students/:id/graduation-date', {
    schema: { ...hidden, params: idParams, body: body(['graduation_date'], { graduation_date: { ...date, nullable: true } }) },
  }, async (request) => {
    await setGraduationDateInApp(db, studentId(request), (request.body as { graduation_date: string | null }).graduation_date);
    return alumniHistory(db, studentId(request));
  });

  app.post('/students/:id/verify-email', {
    schema: { ...hidden, params: idParams, body: body(['email'], { email }) },
  }, async (request) => verifyEmail(db, studentId(request), (request.body as { email: string }).email));

  app.delete('/students/:id', { schema: { ...hidden, params: idParams } }, async (request, reply) => {
    await eraseStudent(db, studentId(request));
    return reply.code(204).send();
  });

  app.get('/students/:id/alumni-history', { schema: { ...hidden, params: idParams } }, async (request) =>
    alumniHistory(db, studentId(request)));

  app.post('/demo', {
    schema: {
      ...hidden,
      body: {
        type: ['object', 'null'], additionalProperties: false,
        properties: { students: { type: 'integer', minimum: 1, maximum: DEMO_MAX_STUDENTS }, seed: { type: 'integer', minimum: 0, maximum: 2_147_483_647 } },
      },
    },
  }, async (request, reply) => {
    const input = (request.body ?? {}) as { students?: number; seed?: number };
    const result = await db.asOperator(async (tx) => {
      if (await demoExists(tx, input.seed)) throw apiError('DEMO_EXISTS');
      return loadDemo(tx, input);
    });
    reply.code(201);
    return result;
  });
}
