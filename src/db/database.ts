import { LOST_RACE_SQLSTATES } from './savepoint.ts';
import { type Queryable, type ReaderBinding, STATEMENT_TIMEOUT_GRACE_MS, type Store, type TransactionOptions, isDatabaseError } from './store.ts';

/** The universities a token may see: one, or the members of a consortium. */
export interface Scope {
  readonly universityIds: readonly string[];
}

/** A university id as the token lookup returns it; nothing else may enter a SET statement. */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const UUID = new RegExp(UUID_PATTERN);

/**
 * How every session of the service reads and writes times and dates, whatever the defaults of the
 * server, database or role: times in UTC, and dates as `YYYY-MM-DD` text, which the write rules
 * compare as strings. Under a database's DateStyle of `SQL, DMY` (`30/06/2024`) a PATCH stored an
 * inverted date range, every replay of a student with a graduation date was `updated`, and a move
 * into a cohort that had ended derived `is_alumni: false`.
 */
const TIME_SETTINGS: Readonly<Record<string, string>> = { TimeZone: 'UTC', DateStyle: 'ISO, MDY' };

/**
 * How often a backend running a statement checks that the service is still connected (Linux
 * servers). A session the service gave up on (the store wait, PDS_DB_WAIT_MS) is destroyed
 * without a cancel; its backend, waiting for a lock, kept its connection slot and the locks it
 * held until the lock's holder ended: operator calls behind a held table lock left 30 backends of
 * a pool of 10 after 19 s, and past max_connections every request of every university was 503.
 */
const CLIENT_CHECK_SETTINGS: Readonly<Record<string, string>> = { client_connection_check_interval: '1000' };

/** What every session and transaction sets besides role, scope and statement timeout. */
const SESSION_SETTINGS: Readonly<Record<string, string>> = { ...TIME_SETTINGS, ...CLIENT_CHECK_SETTINGS };

/**
 * The settings of a transaction as SET LOCAL statements, sent as one simple-protocol message. SET
 * LOCAL, unlike set_config(), is what Citus forwards to the worker connections of the transaction
 * (with citus.propagate_set_commands = 'local'; elsewhere that setting is an inert placeholder), so
 * the scope reaches every node on which row-level security runs. SET takes no parameters: the
 * values are literals, and only values that cannot carry SQL get here: the role names are
 * constants, the scope and its one university are uuids checked against UUID (hex digits and
 * hyphens only, so the quoted literal cannot end early), the timeout a whole number.
 */
function settingsSql(role: 'pds_app' | 'pds_tenant' | 'pds_operator', settings: Readonly<Record<string, string>>): string {
  const statements = [`set local citus.propagate_set_commands = 'local'`, `set local role ${role}`];
  for (const [name, value] of Object.entries({ ...SESSION_SETTINGS, ...settings })) statements.push(`set local ${name} = '${value}'`);
  return statements.join('; ');
}

/** The statement_timeout setting of `ms` milliseconds, a whole number. */
const statementTimeout = (ms: number): Record<string, string> => ({ statement_timeout: String(Math.trunc(ms)) });

/** The statement timeout of a transaction that waits `storeWaitMs` for the store: a second less, so the server cancels first. */
const statementTimeoutWithin = (storeWaitMs: number): Record<string, string> =>
  statementTimeout(Math.max(1, storeWaitMs - STATEMENT_TIMEOUT_GRACE_MS));

/**
 * On Citus a partner's statement touches one university's shard, or a consortium's few: one
 * connection per worker serves them. With the default executor pool, a multi-shard page opened
 * further worker connections under load and closed them at commit (more than
 * citus.max_cached_conns_per_worker): a consortium's 100-row page at 8 callers went from
 * 21–26/s to 151–205/s with a pool of one (bench/read-page.ts data, 20,000 students).
 * Elsewhere the setting is an inert placeholder.
 */
export const CITUS_PARTNER_SETTINGS: Readonly<Record<string, string>> = { 'citus.max_adaptive_executor_pool_size': '1' };

/** The setting row-level security reads the scope from (pds_scope(), src/db/migrations/001_schema.sql). */
const SCOPE_SETTING = 'pds.scope';
/** The setting pds_tenant's policies read their one university from (pds_university(), src/db/migrations/009_one_university_role.sql). */
const UNIVERSITY_SETTING = 'pds.university';

function scopeSetting(scope: Scope): string {
  const bad = scope.universityIds.find((id) => !UUID.test(id));
  if (bad !== undefined) throw new Error(`A scope holds ${JSON.stringify(bad)}, which is not a uuid.`);
  return scope.universityIds.join(',');
}

/**
 * Every statement the service runs goes through one of these doors, each under a role that
 * row-level security binds: partners as `pds_app` limited to their scope (a university's writes
 * as `pds_tenant` limited to it, which the planner costs right: asUniversity), the operator API
 * as `pds_operator`. Transactions set role and scope with SET LOCAL, so nothing leaks from one
 * request to the next on a shared session (PGlite) or a pooled connection. Partner reads on a
 * PostgreSQL server, and one university's on the Citus node holding its shard, run on reader
 * sessions instead, which hold role and scope as session state and serve nothing else
 * (Store.readAsReader).
 */
export class Database {
  /**
   * A partner reader session's startup parameters (Store.readAsReader). The role is the
   * session's own from its start: RESET ROLE and RESET ALL return to it (only SET ROLE NONE
   * would leave it, and reader sessions run nothing but the read statements of src/query/sql.ts).
   * Its scope starts empty, which sees nothing; it is read-only. Plans are cached: a page's
   * statement repeats with other values, and planning it anew cost as much as running it (the
   * cheap page at 10 sessions: 3,600–4,400/s planned each time, 6,200–7,000/s cached, pgbench on
   * bench/read-page.ts data).
   */
  private readonly readerParameters: Readonly<Record<string, string>>;
  /** Reader bindings by scope (partnerReader); weak, so a binding goes with its scope. */
  private readonly readers = new WeakMap<Scope, ReaderBinding>();
  /** An operator transaction's settings: its role, and the statement timeout every transaction has. */
  private readonly operatorSettings: string;

  constructor(readonly store: Store, readonly statementTimeoutMs: number) {
    this.readerParameters = {
      role: 'pds_app',
      [SCOPE_SETTING]: '',
      ...SESSION_SETTINGS,
      ...statementTimeout(statementTimeoutMs),
      default_transaction_read_only: 'on',
      plan_cache_mode: 'force_generic_plan',
    };
    this.operatorSettings = settingsSql('pds_operator', statementTimeout(statementTimeoutMs));
  }

  /** The settings are the scope's reader binding's (partnerReader), made once per scope object. */
  asPartner<T>(scope: Scope, fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const { settings, scope: readerScope } = this.partnerReader(scope).transaction;
    return this.store.transaction(fn, { ...options, settings, scope: readerScope });
  }

  /**
   * One read-only statement as a partner, on a session that holds the role and the scope
   * (Store.readAsReader), each row as its columns unparsed (Queryable.queryColumns).
   */
  readAsPartner(scope: Scope, text: string, params: readonly (string | null)[]): Promise<unknown[][]> {
    return this.store.readAsReader(this.partnerReader(scope), 'columns', text, params);
  }

  /**
   * A partner's role and scope as a reader binding: as session state, and as a read-only
   * transaction's settings. Made once per scope object: a token's principal is one object while
   * it is cached (src/domain/tokens.ts), and every read of it needs the same binding.
   */
  partnerReader(scope: Scope): ReaderBinding {
    let reader = this.readers.get(scope);
    if (!reader) {
      const value = scopeSetting(scope);
      reader = {
        startupParameters: this.readerParameters,
        scope: { setting: SCOPE_SETTING, value },
        transaction: { readOnly: true, settings: this.partnerSettings(scope), scope: value },
        universityIds: scope.universityIds,
      };
      this.readers.set(scope, reader);
    }
    return reader;
  }

  /**
   * A transaction as the operator, run once more when it lost a race with another
   * (LOST_RACE_SQLSTATES), as a batch decides its rows again: on Citus an operator's new member
   * university and a token's last_used_at write (both on reference tables, which Citus locks
   * together) deadlocked now and then, and the create was 503 CONCURRENT_WRITE (5 in 60 with
   * other suites beside them).
   */
  async asOperator<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const settings = options.storeWaitMs === undefined ? this.operatorSettings : settingsSql('pds_operator', statementTimeoutWithin(options.storeWaitMs));
    const run = () => this.store.transaction(fn, { ...options, settings });
    try {
      return await run();
    } catch (error) {
      if (!isDatabaseError(error) || !LOST_RACE_SQLSTATES.has(error.code)) throw error;
      return run();
    }
  }

  /** The settings travel with the BEGIN of the transaction (TransactionOptions.settings). */
  partnerSettings(scope: Scope): string {
    return settingsSql('pds_app', this.transactionSettings(scopeSetting(scope)));
  }

  /**
   * A transaction of one university's writes, as pds_tenant, whose policies bind it to the
   * university by an equality the planner costs right (src/db/migrations/009_one_university_role.sql
   * has why; docs/decisions.md, Storage and scoping, why reads keep pds_app).
   */
  asUniversity<T>(universityId: string, fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.store.transaction(fn, { settings: this.universitySettings(universityId) });
  }

  /** The settings of asUniversity's transactions. */
  universitySettings(universityId: string): string {
    const university = scopeSetting({ universityIds: [universityId] });
    return settingsSql('pds_tenant', { ...this.transactionSettings(university), [UNIVERSITY_SETTING]: university });
  }

  /** A partner transaction's settings but its role: the scope (scopeSetting's checked value), timeout and Citus executor. */
  private transactionSettings(scope: string): Record<string, string> {
    return {
      [SCOPE_SETTING]: scope,
      ...statementTimeout(this.statementTimeoutMs),
      ...CITUS_PARTNER_SETTINGS,
    };
  }
}
