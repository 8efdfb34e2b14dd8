/**
 * The PostgreSQL server backend of the store adapter (src/db/store.ts): statements and
 * transactions on pooled sessions (src/db/session-pool.ts), and partner reads on reader
 * sessions of a pool of their own, or on Citus on sessions to the node holding their shards.
 */
import { isDeepStrictEqual } from 'node:util';
import { PostgresError } from 'pg-error-enum';
import { CitusReadRoutes, type ClusterNode, PLACEMENTS_SQL, type Placement, nodeUrl, placementsParams } from './citus-read-routes.ts';
import { rollBack } from './postgres-sessions.ts';
import { SessionPool, shuttingDown } from './session-pool.ts';
import {
  type PoolStats, type Queryable, type ReaderBinding, type RowForm, type RowForms, type Store, type TransactionOptions, DEFAULT_STORE_TIMEOUTS, type StoreTimeouts, StoreUnavailableError, beginMessages, pipelined,
} from './store.ts';

/** Whether the server is a Citus coordinator: its sessions cannot carry a scope to the workers. */
const IS_CITUS = `select exists (select 1 from pg_extension where extname = 'citus') as citus`;

/**
 * The startup parameters of the sessions to the node holding a read's shards. There Citus runs
 * the read by local execution, and Citus 13.2.2 re-plans a prepared fast-path statement's shard
 * query on every execution of its generic plan and keeps each plan, a list that grows without
 * bound for the session's life (docs/scaling.md, "Citus's local plan cache"). Planned for its
 * values each time instead, one university's cheap page ran at 4,558/s against 3,806/s (pgbench,
 * 32 clients, the read transaction pipelined, 100,000 students).
 */
export const CITUS_NODE_PARAMETERS: Readonly<Record<string, string>> = { plan_cache_mode: 'force_custom_plan' };

/**
 * The role of reader sessions on a Citus node (src/db/migrations/007_node_readers.sql): pds_app's
 * grants and policies, and no login. Holding role and scope as session state spares a read its
 * transaction (one university's cheap page on its node: 4,549–5,028/s against 3,590–4,421/s in
 * the read transaction, pgbench, 32 clients). A read that Citus would send to another node (its
 * shard moved since its route was looked up) must open a connection there as this role, which is
 * refused: the read fails (SHARD_ELSEWHERE) instead of running there without its scope, which
 * only the session holds, and answering no rows.
 */
export const NODE_READER_ROLE = 'pds_reader';

/** The startup parameters of a reader session on a Citus node, from those of the store's reader sessions. */
export const nodeReaderParameters = (readerParameters: Readonly<Record<string, string>>): Readonly<Record<string, string>> =>
  ({ ...readerParameters, role: NODE_READER_ROLE, ...CITUS_NODE_PARAMETERS });

/** Whether a read of these universities on Citus runs on a reader session of their node (readAsReader): one university's. */
export const readsOnNodeSession = (universityIds: readonly string[]): boolean => universityIds.length === 1;

/** From the node: it could not reach another node as NODE_READER_ROLE. */
const SHARD_ELSEWHERE: string = PostgresError.CONNECTION_FAILURE;

/** A reader's statement and the form its rows come back in. */
interface ReaderStatement<F extends RowForm> {
  readonly form: F;
  readonly text: string;
  readonly params: readonly (string | null)[];
}

export interface PostgresStoreOptions {
  /** Partner reads on reader sessions (PDS_READER_SESSIONS); on by default. */
  readonly readerSessions?: boolean;
  /** On Citus, partner reads on the node holding their shards (PDS_CITUS_READ_NODES); on by default. */
  readonly citusReadNodes?: boolean;
}

export function openPostgresStore(url: string, maxConnections: number, timeouts: StoreTimeouts = DEFAULT_STORE_TIMEOUTS, options: PostgresStoreOptions = {}): Store {
  const limits = { maxConnections, ...timeouts };
  const pool = new SessionPool(url, limits);
  // On Citus, the pools of each node that partner reads were sent to (src/db/citus-read-routes.ts),
  // by host and port: for read transactions, and reader sessions; opened on first use.
  const nodePools = { transactions: new Map<string, SessionPool>(), readers: new Map<string, SessionPool>() };
  // Partner reads' sessions, opened with the reader's startup parameters on first use (readAsReader).
  let readers: { pool: SessionPool; parameters: ReaderBinding['startupParameters'] } | null = null;
  let closed = false;
  let citus: Promise<boolean> | null = null;
  // The answer once known, so that a read does not wait a turn of the event loop for it.
  let distributed: boolean | null = null;
  const once = async <T>(fn: (tx: Queryable) => Promise<T>): Promise<T> => {
    const lease = await pool.lease();
    try {
      return await fn(lease.queryable());
    } finally {
      pool.release(lease);
    }
  };
  // Asked once, of the first read: a database becomes a Citus cluster only by migrating it, and the
  // service migrates at start. A failed check is asked again by the next read.
  const isCitus = () => {
    citus ??= once((tx) => tx.query<{ citus: boolean }>(IS_CITUS)).then(([row]) => (distributed = row.citus), (error) => {
      citus = null;
      throw error;
    });
    return citus;
  };
  /**
   * A partner's read is one of its scope's sessions (TransactionOptions.scope, SessionPool.lease). BEGIN,
   * the statement and COMMIT go out together, nothing awaited in between: one
   * round trip where awaiting the statement before COMMIT made two (the cheap page's transaction
   * at 32 callers on 10 sessions: 1,370–1,630/s against 1,270–1,320/s). After a failed BEGIN or
   * statement the transaction is aborted and COMMIT answers ROLLBACK without an error, so the
   * session comes back idle; a session that failed is destroyed by its lease and never handed out again.
   */
  const readInTransaction = async <F extends RowForm>(on: SessionPool, statement: ReaderStatement<F>, options: TransactionOptions = {}): Promise<RowForms[F][]> => {
    const lease = await on.lease(options.storeWaitMs, options.scope);
    const tx = lease.queryable();
    try {
      const begin = beginMessages(options);
      const outcomes = await Promise.allSettled([
        ...begin.map((message) => tx.exec(message)), lease.send(statement.form, statement.text, statement.params), tx.exec('commit'),
      ]);
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed) {
        // As in transaction(): a session that cannot answer a ROLLBACK (one whose connect was refused) is ended.
        if (!lease.session.lost) await rollBack(lease);
        throw failed.reason;
      }
      return (outcomes[begin.length] as PromiseFulfilledResult<RowForms[F][]>).value;
    } finally {
      on.release(lease);
    }
  };
  const routes = new CitusReadRoutes((universityIds) => once((tx) => tx.query<Placement>(PLACEMENTS_SQL, placementsParams(universityIds))));
  // `parameters` are asked for only when the node's pool is opened.
  const nodePool = (kind: keyof typeof nodePools, node: ClusterNode, parameters: () => Readonly<Record<string, string>>): SessionPool => {
    const key = `${node.host}:${node.port}`;
    let opened = nodePools[kind].get(key);
    if (!opened) {
      if (closed) throw shuttingDown();
      opened = new SessionPool(nodeUrl(url, node), limits, parameters());
      nodePools[kind].set(key, opened);
    }
    return opened;
  };
  /** Every pool opened so far: the store's own, its reader sessions', and each node's. */
  const openPools = (): SessionPool[] =>
    [pool, ...(readers ? [readers.pool] : []), ...nodePools.transactions.values(), ...nodePools.readers.values()];
  const transactionsOn = (node: ClusterNode | null): SessionPool => (node ? nodePool('transactions', node, () => CITUS_NODE_PARAMETERS) : pool);
  /**
   * A read on a reader session of `on`, which holds the role and the scope as session state. A
   * read whose scope is its session's is its statement alone; a session whose scope differs gets
   * the new one first, in the same pipeline, and the statement's answer is used only once the
   * change is confirmed and the session's role is `role`. When every session is in use, a read
   * is sent behind another on a session that holds its scope (SessionPool.share) rather than wait
   * for one; a session whose scope is changing holds none until the change is confirmed, and holds
   * the new one from then on, while the statement sent with the change may still be running.
   */
  const readOnReaderSession = async <F extends RowForm>(on: SessionPool, role: string, binding: ReaderBinding, statement: ReaderStatement<F>): Promise<RowForms[F][]> => {
    const lease = on.share((session) => session.scope === binding.scope.value, binding.scope.value) ?? await on.lease(undefined, binding.scope.value);
    try {
      const { session } = lease;
      if (session.scope === binding.scope.value) return await lease.send(statement.form, statement.text, statement.params);
      session.scope = null;
      const change = lease.send('objects', `select set_config($1, $2, false), current_user as role`, [binding.scope.setting, binding.scope.value]);
      const read = lease.send(statement.form, statement.text, statement.params);
      // Answered after the change: when the change fails, the read's own failure is not the one reported.
      read.catch(() => undefined);
      let sessionRole: string;
      try {
        sessionRole = String((await change)[0].role);
      } catch (error) {
        session.destroy(new StoreUnavailableError('SCOPE_NOT_SET', String(error)));
        throw error;
      }
      if (sessionRole !== role) {
        session.destroy(new StoreUnavailableError('SCOPE_NOT_SET', `A reader session runs as ${sessionRole}.`));
        throw new Error(`A reader session runs as ${sessionRole}, not ${role}: its pooler dropped the role (PDS_READER_SESSIONS).`);
      }
      session.scope = binding.scope.value;
      return await read;
    } finally {
      on.release(lease);
    }
  };
  return {
    query: (text, params) => once((tx) => tx.query(text, params)),
    exec: (text) => once((tx) => tx.exec(text)),
    queryColumns: (text, params) => once((tx) => tx.queryColumns(text, params)),
    /**
     * BEGIN and the settings (src/db/store.ts beginMessages) are not awaited: it travels in one pipeline with
     * the callback's first statements, so a one-query transaction costs two round trips, not four.
     */
    async transaction(fn, options = {}) {
      const lease = await pool.lease(options.storeWaitMs, options.scope);
      const tx = lease.queryable();
      try {
        const result = await pipelined(Promise.all(beginMessages(options).map((message) => tx.exec(message))), () => fn(tx));
        await tx.exec('commit');
        return result;
      } catch (error) {
        // A lost session rolled back on the server already; one that cannot roll back is ended.
        if (!lease.session.lost) await rollBack(lease);
        throw error;
      } finally {
        pool.release(lease);
      }
    },
    queryInTransaction: <T>(text: string, params: readonly (string | null)[], options?: TransactionOptions) =>
      readInTransaction(pool, { form: 'objects', text, params }, options) as Promise<T[]>,
    /**
     * A reader session holds the role and the scope as session state, so a read whose scope is its
     * session's is its statement alone: one message and one answer, where a transaction around it
     * costs three more of each (the cheap page by postgres.js at 32 callers: 2,645/s for the statement
     * alone, 1,555/s with BEGIN, the settings and COMMIT sent with it). A session whose scope
     * differs gets the new one first, in the same pipeline; the statement's answer is used only
     * once the change is confirmed, so a failed change never returns rows read under the old scope.
     * The change also reads the session's role, and a session's first read always makes it: a
     * pooler that dropped the role from the startup parameters fails the read instead of running
     * it as the login role. Sessions must be the service's own (no transaction pooler: the
     * recorded scope would be another server session's). On Citus only SET LOCAL reaches the
     * other nodes, so there a read is sent to the node holding the scope's shards
     * (src/db/citus-read-routes.ts): one university's on a reader session of that node as
     * NODE_READER_ROLE, Citus running it there by local execution; a read that fails to reach
     * another node (SHARD_ELSEWHERE), and every other read, in a transaction, whose SET LOCAL
     * scope Citus carries to the other nodes. With reader sessions off, every read keeps its
     * transaction.
     */
    async readAsReader<F extends RowForm>(binding: ReaderBinding, form: F, text: string, params: readonly (string | null)[]) {
      const statement = { form, text, params };
      if (distributed ?? await isCitus()) {
        const node = options.citusReadNodes === false ? null : await routes.nodeFor(binding.scope.value, binding.universityIds);
        if (node && readsOnNodeSession(binding.universityIds) && options.readerSessions !== false) {
          const sessions = nodePool('readers', node, () => nodeReaderParameters(binding.startupParameters));
          try {
            return await readOnReaderSession(sessions, NODE_READER_ROLE, binding, statement);
          } catch (error) {
            if ((error as { code?: unknown }).code !== SHARD_ELSEWHERE) throw error;
          }
        }
        return readInTransaction(transactionsOn(node), statement, binding.transaction);
      }
      if (options.readerSessions === false) return readInTransaction(pool, statement, binding.transaction);
      if (closed) throw shuttingDown();
      readers ??= { parameters: binding.startupParameters, pool: new SessionPool(url, limits, binding.startupParameters) };
      if (readers.parameters !== binding.startupParameters && !isDeepStrictEqual(readers.parameters, binding.startupParameters)) throw new Error('A store opens its reader sessions with one set of startup parameters.');
      return readOnReaderSession(readers.pool, binding.startupParameters.role, binding, statement);
    },
    isDistributed: isCitus,
    transactionConnections: maxConnections,
    poolStats: () => {
      const all = openPools().map((each) => each.stats());
      const total = (key: keyof PoolStats) => all.reduce((sum, stats) => sum + stats[key], 0);
      return { inUse: total('inUse'), waiting: total('waiting'), shared: total('shared') };
    },
    close: async () => {
      closed = true;
      await Promise.all(openPools().map((each) => each.close()));
    },
  };
}
