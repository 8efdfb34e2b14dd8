/**
 * The one database adapter. Two backends share it: a PostgreSQL server through postgres.js,
 * and embedded PGlite. Callers see only the `Store` and `Queryable` interfaces below; all SQL is
 * plain text with `$n` parameters, so the same statements run on both.
 */
import { setImmediate } from 'node:timers/promises';

export type Row = Record<string, unknown>;

export interface Queryable {
  /** One parameterised statement. Parameters are strings or null, sent untyped. */
  query<T = Row>(text: string, params?: readonly (string | null)[]): Promise<T[]>;
  /** Several statements without parameters (migrations, fixed SQL). */
  exec(text: string): Promise<void>;
  /**
   * One parameterised statement, each row as its columns in order, unparsed: the bytes the
   * server sent where the driver hands them over without decoding them (postgres.js), what the
   * driver made of them otherwise (PGlite: text, numbers); null for NULL.
   */
  queryColumns(text: string, params?: readonly (string | null)[]): Promise<unknown[][]>;
}

export interface TransactionOptions {
  isolation?: 'read committed' | 'repeatable read';
  readOnly?: boolean;
  /** Replaces the store-wait budget (StoreTimeouts.storeWaitMs) for this transaction, e.g. for migrations. */
  storeWaitMs?: number;
  /** A partner's scope (ReaderBinding.scope.value), of whose connections the transaction is one (src/db/session-pool.ts, scopeShare). */
  scope?: string;
  /**
   * SET LOCAL statements (src/db/database.ts) run right after BEGIN, sent with it without waiting
   * (beginMessages): one round trip for both.
   */
  settings?: string;
}

/**
 * Who reads and within what, as session state (Store.readAsReader, src/db/database.ts): the
 * parameters a reader session starts with (its role among them), and its scope, a setting
 * changed per read when it differs.
 */
export interface ReaderBinding {
  /** The same for every read of a store: it opens its reader sessions with them. */
  readonly startupParameters: Readonly<Record<string, string>>;
  readonly scope: {
    readonly setting: string;
    readonly value: string;
  };
  /** The same role and scope as a transaction's settings, for a store whose sessions cannot hold them. */
  readonly transaction: TransactionOptions;
  /** The scope's universities: a Citus store sends the read to the node holding their shards (src/db/citus-read-routes.ts). */
  readonly universityIds: readonly string[];
}

/** How a statement's rows come back: objects of parsed values (Queryable.query), or their columns unparsed (Queryable.queryColumns). */
export interface RowForms {
  readonly objects: Row;
  readonly columns: unknown[];
}

export type RowForm = keyof RowForms;

/**
 * Sends one statement for its rows in `form`, at once: a reader's statement is always sent this
 * way, so it travels in one pipeline behind its scope change or its BEGIN and before its COMMIT.
 */
export function sendStatement<F extends RowForm>(tx: Queryable, form: F, text: string, params: readonly (string | null)[]): Promise<RowForms[F][]> {
  return (form === 'columns' ? tx.queryColumns(text, params) : tx.query(text, params)) as Promise<RowForms[F][]>;
}

/** How busy the store's connections are right now (the metrics read it at each scrape). */
export interface PoolStats {
  /** Connections (PGlite: its one session) held by a request. */
  readonly inUse: number;
  /** Requests waiting for one to come free. */
  readonly waiting: number;
  /** Reads sent behind another on a connection held by a read of their scope (src/db/session-pool.ts, share). */
  readonly shared: number;
}

export interface Store extends Queryable {
  /** Connections transactions share (the pool besides reader sessions); PGlite has its one session. */
  readonly transactionConnections: number;
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * One parameterised statement in a transaction of its own. The whole transaction (BEGIN with
   * its settings, the statement, COMMIT) is sent at once and costs one round trip. A failure is
   * the first one in that order: a setting refused is the cause of the statement's failure.
   */
  queryInTransaction<T = Row>(text: string, params: readonly (string | null)[], options?: TransactionOptions): Promise<T[]>;
  /**
   * One read-only statement under a reader binding, its rows in `form`. Where sessions can hold
   * the binding (a PostgreSQL server; on Citus one university's read, on the node holding its
   * shard) it runs on a session of a pool of its own; elsewhere (PGlite's one shared session, a
   * consortium on Citus) in a transaction with the binding's settings, sent as queryInTransaction
   * sends its statement; on Citus to the node holding the scope's shards.
   */
  readAsReader<F extends RowForm>(binding: ReaderBinding, form: F, text: string, params: readonly (string | null)[]): Promise<RowForms[F][]>;
  /**
   * Whether the store is a Citus cluster, asked of it once. Citus plans a read of one table by its
   * tenant on its fast path, so there one university's page is sent as rows (src/query/execute.ts sentAsRows).
   */
  isDistributed(): Promise<boolean>;
  poolStats(): PoolStats;
  close(): Promise<void>;
}

/** How long the PostgreSQL backend waits on its connections (set in src/config.ts). */
export interface StoreTimeouts {
  /** TCP connect, then startup and authentication, each within this. */
  connectTimeoutMs: number;
  /** Longest wait for a free connection when all are in use. */
  poolWaitMs: number;
  /**
   * Longest time one transaction (or lone statement) may spend waiting for the store's answers,
   * connecting included; past it the connection is destroyed and the statement fails.
   */
  storeWaitMs: number;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 5_000;

/**
 * The store-wait budget exceeds the statement timeout by this much, so that a slow statement is
 * cancelled by the server (57014, QUERY_TIMEOUT) before the client gives up on the connection.
 */
export const STATEMENT_TIMEOUT_GRACE_MS = 1_000;

export const DEFAULT_STORE_TIMEOUTS: StoreTimeouts = {
  connectTimeoutMs: 2_000,
  poolWaitMs: 2_000,
  storeWaitMs: DEFAULT_STATEMENT_TIMEOUT_MS + STATEMENT_TIMEOUT_GRACE_MS,
};

/**
 * The store could not be reached or did not answer: the connection failed, closed, timed out,
 * or no connection came free. Nothing the caller sent caused it; a retry may succeed.
 */
export class StoreUnavailableError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/**
 * Resolves once the statements sent so far are written to the server's connection, so that work
 * needing none of their answers runs while the server answers them. postgres.js (3.4) writes a
 * statement in a microtask after it is sent, and buffers small ones until the next turn of the
 * event loop (setImmediate): the second turn comes after that write. On PGlite it is two turns
 * of the event loop, in which PGlite runs what it was sent.
 */
export async function statementsWritten(): Promise<void> {
  await setImmediate();
  await setImmediate();
}

/**
 * Runs `rest` after `first`, a statement already sent and not awaited, so the two travel in one
 * pipeline (statements on one connection run in order). When `rest` fails, `first`'s own failure
 * is what the caller sees if it had one: it is the cause (a lock wait cut by the statement
 * timeout, say), and the statements after it failed only because the transaction was aborted.
 */
export async function pipelined<T>(first: Promise<unknown>, rest: () => Promise<T>): Promise<T> {
  first.catch(() => {});
  try {
    const result = await rest();
    await first;
    return result;
  } catch (error) {
    await first;
    throw error;
  }
}

/** The fields every database error carries on both backends. */
export interface DatabaseError extends Error {
  code: string;
  detail?: string;
  hint?: string;
}

/**
 * The constraint a violation names. postgres.js and PGlite give it as a field, spelt differently;
 * Citus passes a worker's error on with its message alone, which names the shard's constraint
 * (`campuses_name_key_102035`: the suffix is the shard's id).
 */
export function violatedConstraint(error: DatabaseError): string | null {
  const fields = error as { constraint?: string; constraint_name?: string };
  const named = fields.constraint_name ?? fields.constraint;
  if (named) return named;
  const quoted = /constraint "([^"]+)"/.exec(error.message)?.[1];
  return quoted ? quoted.replace(/_\d+$/, '') : null;
}

/**
 * The embedded store's one session stayed held by other requests for longer than a request may
 * wait for it (PDS_EMBEDDED_WAIT_MS).
 */
export class StoreBusyError extends Error {
  readonly code = 'STORE_BUSY';
  constructor(readonly waitedMs: number) {
    super(`The embedded store's session stayed busy for ${waitedMs} ms.`);
  }
}

export function isDatabaseError(error: unknown): error is DatabaseError {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

export function transactionPreamble(options: TransactionOptions): string {
  const modes = [
    options.isolation ? `isolation level ${options.isolation}` : '',
    options.readOnly ? 'read only' : '',
  ].filter(Boolean);
  return modes.join(' ');
}

/**
 * BEGIN with the transaction's modes, then its settings, as two messages sent together (one round
 * trip). Never one message: PostgreSQL parses a message whole before running any of it, so a
 * settings text it could not parse would take the BEGIN down with it, and the statements behind
 * it would run in autocommit under the login role, outside row-level security.
 */
export function beginMessages(options: TransactionOptions): string[] {
  const begin = `begin ${transactionPreamble(options)}`;
  return options.settings ? [begin, options.settings] : [begin];
}

/** A PostgreSQL server's connections per instance in each of its two pools, unless PDS_DB_MAX_CONNECTIONS says otherwise. */
export const DEFAULT_MAX_CONNECTIONS = 10;
