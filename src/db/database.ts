import type { Queryable, Row, Store, TransactionOptions } from './store.ts';

/** The universities a token may see: one, or the members of a consortium. */
export interface Scope {
  readonly universityIds: readonly string[];
}

/** A university id as the token lookup returns it; nothing else may enter a SET statement. */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const UUID = new RegExp(UUID_PATTERN);

/**
 * The settings of a transaction as SET LOCAL statements, sent as one simple-protocol message. SET
 * LOCAL, unlike set_config(), is what Citus forwards to the worker connections of the transaction
 * (with citus.propagate_set_commands = 'local'; elsewhere that setting is an inert placeholder), so
 * the scope reaches every node on which row-level security runs. SET takes no parameters: the
 * values are literals, and only values that cannot carry SQL get here: the role names are
 * constants, the scope is a list of uuids checked against UUID (hex digits and hyphens only, so
 * the quoted literal cannot end early), the timeout a whole number.
 */
function settingsSql(role: 'pds_app' | 'pds_operator', settings: Readonly<Record<string, string>>): string {
  const statements = [`set local citus.propagate_set_commands = 'local'`, `set local role ${role}`, `set local timezone = 'UTC'`];
  for (const [name, value] of Object.entries(settings)) statements.push(`set local ${name} = '${value}'`);
  return statements.join('; ');
}

const OPERATOR_SETTINGS = settingsSql('pds_operator', {});

export function scopeSetting(scope: Scope): string {
  const bad = scope.universityIds.find((id) => !UUID.test(id));
  if (bad !== undefined) throw new Error(`A scope holds ${JSON.stringify(bad)}, which is not a uuid.`);
  return scope.universityIds.join(',');
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
    return this.store.transaction(fn, { ...options, settings: this.partnerSettings(scope) });
  }

  /** One statement as a partner: the whole transaction in one round trip (Store.queryInTransaction). */
  queryAsPartner<T = Row>(scope: Scope, text: string, params: readonly (string | null)[], options: TransactionOptions = {}): Promise<T[]> {
    return this.store.queryInTransaction<T>(text, params, { ...options, settings: this.partnerSettings(scope) });
  }

  asOperator<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    return this.store.transaction(fn, { ...options, settings: OPERATOR_SETTINGS });
  }

  /**
   * The settings travel with the BEGIN of the transaction (TransactionOptions.settings).
   * On Citus a partner's statement touches one university's shard, or a consortium's few: one
   * connection per worker serves them. With the default executor pool, a multi-shard page opened
   * further worker connections under load and closed them at commit (more than
   * citus.max_cached_conns_per_worker): a consortium's 100-row page at 8 callers went from
   * 21–26/s to 151–205/s with a pool of one (bench/read-page.ts data, 20,000 students).
   */
  partnerSettings(scope: Scope): string {
    return settingsSql('pds_app', {
      'pds.scope': scopeSetting(scope),
      statement_timeout: String(Math.trunc(this.statementTimeoutMs)),
      'citus.max_adaptive_executor_pool_size': '1',
    });
  }
}
