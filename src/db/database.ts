import { type Queryable, type Store, type TransactionOptions, pipelined } from './store.ts';

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
    return this.inRole(
      `select set_config('role', 'pds_app', true), set_config('pds.scope', $1, true),
              set_config('statement_timeout', $2, true), set_config('TimeZone', 'UTC', true)`,
      [scope.universityIds.join(','), String(this.statementTimeoutMs)],
      fn, options,
    );
  }

  asOperator<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.inRole(`select set_config('role', 'pds_operator', true), set_config('TimeZone', 'UTC', true)`, [], fn, options);
  }

  /**
   * The settings statement is not awaited before the callback's first statement: statements on
   * one connection run in order, so they travel in one pipeline; a failure of either fails both.
   */
  private inRole<T>(settings: string, params: string[], fn: (tx: Queryable) => Promise<T>, options: TransactionOptions): Promise<T> {
    return this.store.transaction((tx) => pipelined(tx.query(settings, params), () => fn(tx)), options);
  }
}
