/**
 * The operator API under /admin/v1 (docs/decisions.md, Operator API), enabled by PDS_ADMIN_KEY. It onboards
 * universities and stands in for the platform's own app; each area is a plugin of its own
 * behind the one key check here.
 */
import type { FastifyInstance } from 'fastify';
import type { Database } from '../../db/database.ts';
import type { TokenAuthenticator } from '../../domain/tokens.ts';
import { apiError } from '../../errors.ts';
import { requireStaticKey } from '../auth.ts';
import type { AuthFailureGuard } from '../rate-limits.ts';
import { demoRoutes } from './demo.ts';
import { onboardingRoutes } from './onboarding.ts';
import { recordRoutes } from './records.ts';
import { studentRoutes } from './students.ts';
import { tokenRoutes } from './tokens.ts';

/** Without PDS_ADMIN_KEY the operator API answers 404 to everything. */
function requireAdminKey(adminKey: string | undefined, failures: AuthFailureGuard) {
  if (adminKey === undefined) {
    return async () => {
      throw apiError('NOT_FOUND', 'The operator API is disabled: PDS_ADMIN_KEY is not set.');
    };
  }
  return requireStaticKey(adminKey, failures, 'operator');
}

export interface OperatorApiOptions {
  db: Database;
  tokens: TokenAuthenticator;
  authFailures: AuthFailureGuard;
  adminKey?: string;
}

export async function operatorApi(app: FastifyInstance, options: OperatorApiOptions): Promise<void> {
  const { db, tokens } = options;
  app.addHook('onRequest', requireAdminKey(options.adminKey, options.authFailures));
  await app.register(onboardingRoutes, { db, tokens });
  await app.register(recordRoutes, { db });
  await app.register(tokenRoutes, { db, tokens });
  await app.register(studentRoutes, { db });
  await app.register(demoRoutes, { db });
}
