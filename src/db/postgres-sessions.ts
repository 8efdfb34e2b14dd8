/**
 * Sessions to a PostgreSQL server for src/db/postgres-store.ts: one postgres.js connection per
 * session, leased to one caller at a time (or shared by reads of one scope) under a budget of time
 * spent waiting for the server; src/db/session-pool.ts pools them.
 */
import net from 'node:net';
import postgres from 'postgres';
import { parseArrayLiteral } from './array-literal.ts';
import { type Queryable, type RowForm, type RowForms, type StoreTimeouts, StoreUnavailableError } from './store.ts';

const arrayOf = (parse: (element: string) => unknown) => (literal: string) =>
  (parseArrayLiteral(literal) ?? []).map((element) => (element === null ? null : parse(element)));

/**
 * Parameters are always text for PostgreSQL's own input functions to read. postgres.js would
 * otherwise re-serialise them by the described parameter type: the string 'true' would become
 * 'f', and JSON text would be quoted a second time. Array results are parsed here rather than by
 * the types postgres.js fetches when a session connects (`fetch_types: false` below): that fetch
 * is started without a handler, so a session killed during it raised an unhandled rejection
 * (seen 3 times in 4 runs of the terminate test under load), and it cost every new session a
 * round trip.
 */
const textParameters = {
  boolean: { to: 16, from: [16], serialize: String, parse: (x: string) => x === 't' },
  json: { to: 114, from: [114, 3802], serialize: String, parse: (x: string) => JSON.parse(x) },
  date: { to: 1184, from: [1082, 1114, 1184], serialize: String, parse: (x: string) => new Date(x) },
  // text[], name[], varchar[], int8[] (as strings, like int8 itself), uuid[].
  textArray: { to: 1009, from: [1009, 1003, 1015, 1016, 2951], serialize: String, parse: arrayOf(String) },
  integerArray: { to: 1007, from: [1005, 1007], serialize: String, parse: arrayOf(Number) },
  booleanArray: { to: 1000, from: [1000], serialize: String, parse: arrayOf((x) => x === 't') },
};

/** Connections are retired after this long, so a fail-over's old server is left within it. */
export const CONNECTION_LIFETIME_MS = 30 * 60_000;

/** Error codes postgres.js and Node's sockets give when the connection, not the statement, failed. */
const CONNECTION_FAILURE_CODES = new Set([
  'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT',
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
]);

/** A driver's error as StoreUnavailableError when the connection, not the statement, failed; any other error as it is. */
export function asUnavailable(error: unknown): unknown {
  const code = String((error as { code?: unknown })?.code ?? '');
  if (error instanceof StoreUnavailableError || !CONNECTION_FAILURE_CODES.has(code)) return error;
  return new StoreUnavailableError(code, (error as Error).message);
}

/** A postgres.js query: lazy, it is sent when first awaited. */
type Statement = PromiseLike<unknown>;

/** postgres.js's documented `socket` option (README, "Custom socket"), which its types omit. */
interface CustomSocket {
  socket(options: { host: string[]; port: number[]; path?: string }): Promise<net.Socket>;
}

/**
 * One server session, owned by one caller at a time, which reads of its scope may share
 * (SessionPool.share). Each has a postgres.js instance of its own
 * (max 1) whose socket this class opens: postgres.js gets exactly one socket per session and
 * never reconnects it. When the session dies, its statements fail and the pool destroys it
 * instead of handing it out again. postgres.js's own `reserve()` kept using a reserved
 * connection after its backend died (porsager/postgres#1208): the next statement wrote to a
 * null socket from a timer, an uncaught TypeError that ended the process; statements queued
 * behind a full pipeline were never settled.
 */
export class Session {
  readonly sql: postgres.Sql;
  readonly openedAt = Date.now();
  lost: StoreUnavailableError | null = null;
  /**
   * A reader session's scope as last set and confirmed with its role (Store.readAsReader); null
   * until then, so a session's first read always sets it and checks the role, and null while a
   * change is on its way, so that no read shares the session (SessionPool.share) on the old one.
   */
  scope: string | null = null;
  private socket: net.Socket | null = null;
  private socketRequested = false;
  /** Rejecters of the statements sent and not yet settled. */
  private readonly outstanding = new Set<(error: StoreUnavailableError) => void>();

  constructor(url: string, private readonly limits: StoreTimeouts, startupParameters: Readonly<Record<string, string>>) {
    // A Unix-socket URL (`?host=/var/run/postgresql`) arrives as `path`; otherwise the first host.
    const customSocket: CustomSocket = {
      socket: (options) => this.openSocket(options.path ? { path: options.path } : { host: options.host[0], port: options.port[0] }),
    };
    this.sql = postgres(url, Object.assign({
      max: 1,
      onnotice: () => {},
      types: textParameters,
      connection: { application_name: 'partner-data-service', ...startupParameters },
      // Covers the startup and authentication exchange; openSocket bounds the TCP connect.
      connect_timeout: limits.connectTimeoutMs / 1000,
      max_lifetime: 0,
      fetch_types: false,
    }, customSocket));
  }

  /** Statements sent and not yet answered. */
  get inFlight(): number {
    return this.outstanding.size;
  }

  run<T>(statement: Statement): Promise<T> {
    if (this.lost) return Promise.reject(this.lost);
    return new Promise<T>((resolve, reject) => {
      const fail = (error: unknown) => {
        this.outstanding.delete(fail);
        reject(asUnavailable(error));
      };
      this.outstanding.add(fail);
      statement.then((value) => {
        this.outstanding.delete(fail);
        resolve(value as T);
      }, fail);
    });
  }

  /** Ends the session at once: its socket is destroyed and every statement in flight fails. */
  destroy(error: StoreUnavailableError): void {
    if (this.lost) return;
    this.lost = error;
    for (const fail of [...this.outstanding]) fail(error);
    this.socket?.destroy();
    this.sql.end({ timeout: 0 }).catch(() => {});
  }

  private async openSocket(address: net.NetConnectOpts): Promise<net.Socket> {
    if (this.socketRequested) throw new StoreUnavailableError('CONNECTION_CLOSED', 'The session was lost.');
    this.socketRequested = true;
    const socket = net.connect(address);
    this.socket = socket;
    // The socket's error names why it closed (ECONNREFUSED, ECONNRESET…) when it is one of the
    // connection failures above; its close ends the session.
    let failure: string | null = null;
    const watch = () => {
      socket.on('error', (error: NodeJS.ErrnoException) => { failure = error.code && CONNECTION_FAILURE_CODES.has(error.code) ? error.code : null; });
      socket.once('close', () => this.destroy(failure
        ? new StoreUnavailableError(failure, `The connection to the data store failed (${failure}).`)
        : new StoreUnavailableError('CONNECTION_CLOSED', 'The connection to the data store closed.')));
    };
    watch();
    // postgres.js removes every listener of the socket as it starts TLS on it (sslmode=require),
    // these among them: a connection that then dropped stayed in the pool as alive, and for a
    // minute after a server's restart every request that drew one failed.
    const removeAllListeners = socket.removeAllListeners.bind(socket);
    socket.removeAllListeners = (event?: string | symbol) => {
      removeAllListeners(event);
      if (event === undefined) watch();
      return socket;
    };
    const timer = setTimeout(() => {
      this.destroy(new StoreUnavailableError('CONNECT_TIMEOUT', `No connection to the data store within ${this.limits.connectTimeoutMs} ms.`));
    }, this.limits.connectTimeoutMs);
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('close', () => reject(this.lost));
      });
    } finally {
      clearTimeout(timer);
    }
    return socket;
  }
}

/**
 * A lease of a session to one transaction (or one statement). It owns the transaction's budget
 * of time spent waiting for the store: the clock runs while any statement is outstanding, and
 * when the budget is spent the session is destroyed, so a stalled network fails the request
 * instead of hanging it. A lease that has ended refuses statements: nothing can reach a session
 * after it was handed to someone else.
 */
export class Lease {
  private ended = false;
  private budgetMs: number;
  private waitingSince = 0;
  private timer: NodeJS.Timeout | null = null;
  private pending = 0;

  /** `shared`: a lease of a session handed out to someone else (SessionPool.share), not by the pool. */
  constructor(readonly session: Session, budgetMs: number, readonly shared = false) {
    this.budgetMs = budgetMs;
  }

  /**
   * One prepared statement for its rows in `form`, sent at once (before the first await, so
   * statements keep their order in the pipeline). A reader's read on a session that already holds
   * its scope is this call alone (readOnReaderSession in src/db/postgres-store.ts). Through
   * `queryable()` and a callback, as before, the service spent 116 µs of CPU per cheap page
   * against 88 µs this way (two builds side by side, five interleaved rounds at 32 connections);
   * which of those layers' promises and closures cost that under load was not isolated.
   */
  send<F extends RowForm>(form: F, text: string, params: readonly (string | null)[] = []): Promise<RowForms[F][]> {
    const statement = this.session.sql.unsafe(text, params as (string | null)[], { prepare: true });
    return this.settle(form === 'columns' ? statement.raw() : statement);
  }

  queryable(): Queryable {
    const { sql } = this.session;
    return {
      query: <T>(text: string, params?: readonly (string | null)[]) => this.send('objects', text, params) as Promise<T[]>,
      exec: async (text: string) => {
        await this.settle(sql.unsafe(text));
      },
      queryColumns: (text: string, params?: readonly (string | null)[]) => this.send('columns', text, params),
    };
  }

  /**
   * The statement's answer, with the clock running while it is outstanding. A lease that has
   * ended refuses it, and it is never sent: postgres.js sends a statement when it is first awaited.
   */
  private async settle<T>(statement: Statement): Promise<T> {
    if (this.ended) throw new StoreUnavailableError('CONNECTION_ENDED', 'The transaction has ended.');
    if (this.pending++ === 0) this.startClock();
    try {
      return await this.session.run<T>(statement);
    } finally {
      if (--this.pending === 0) this.stopClock();
    }
  }

  end(): void {
    this.ended = true;
    this.stopClock();
  }

  private startClock(): void {
    this.waitingSince = Date.now();
    this.timer = setTimeout(() => {
      this.session.destroy(new StoreUnavailableError('STORE_TIMEOUT', 'The data store did not answer in time.'));
    }, Math.max(0, this.budgetMs));
  }

  private stopClock(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.budgetMs -= Date.now() - this.waitingSince;
  }
}

/** Ends the lease's transaction, if one is open (ROLLBACK outside one only warns); a session that cannot is ended. */
export const rollBack = (lease: Lease) => lease.queryable().exec('rollback')
  .catch((rollbackError) => lease.session.destroy(new StoreUnavailableError('ROLLBACK_FAILED', String(rollbackError))));
