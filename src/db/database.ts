import type { Queryable, Store, TransactionOptions } from './store.ts';

/** The universities a token may see: one, or the members of a consortium. */
export interface Scope {
  readonly universityIds: readonly string[];
}

/**
 * Every statement the service runs goes through one of these two doors, each a transaction
 * under a role that row-level security binds: partners as `pds_app` limited to their scope,
 * the operator API as `pds_operator`. Settings are transaction-local, so nothing leaks from
 * one request to the next on a shared session (PGlite) or a pooled connection.
 */
export class Database {
  constructor(readonly store: Store, readonly statementTimeoutMs: number) {}

  asPartner<T>(scope: Scope, fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.store.transaction(async (tx) => {
      await tx.query(
        `select set_config('role', 'pds_app', true), set_config('pds.scope', $1, true),
                set_config('statement_timeout', $2, true), set_config('TimeZone', 'UTC', true)`,
        [scope.universityIds.join(','), String(this.statementTimeoutMs)],
      );
      return fn(tx);
    }, options);
  }

  asOperator<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.store.transaction(async (tx) => {
      await tx.query(`select set_config('role', 'pds_operator', true), set_config('TimeZone', 'UTC', true)`);
      return fn(tx);
    }, options);
  }
}
