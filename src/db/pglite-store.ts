import { PGlite, type Transaction } from '@electric-sql/pglite';
import { type PoolStats, type Queryable, type Store, StoreBusyError, sendStatement, transactionPreamble } from './store.ts';

/**
 * PGlite is one session: its `transaction` holds that session exclusively, and statements
 * issued outside a transaction wait for it. Per-request state therefore lives only in
 * transaction-local settings.
 */
function queryableOf(db: PGlite | Transaction): Queryable {
  // Statements issued without awaiting the previous one still run in issue order.
  let last: Promise<unknown> = Promise.resolve();
  const inOrder = <R>(run: () => Promise<R>): Promise<R> => {
    const next = last.then(run, run);
    last = next.catch(() => {});
    return next;
  };
  return {
    query<T>(text: string, params: readonly (string | null)[] = []) {
      return inOrder(async () => (await db.query<T>(text, params as (string | null)[])).rows);
    },
    exec(text: string) {
      return inOrder(async () => void (await db.exec(text)));
    },
    queryColumns(text: string, params: readonly (string | null)[] = []) {
      return inOrder(async () => (await db.query<unknown[]>(text, params as (string | null)[], { rowMode: 'array' })).rows);
    },
  };
}

/**
 * First come, first served access to the one session, with a bound on the wait: a request that
 * cannot have the session within `waitMs` fails with StoreBusyError (503) instead of queueing
 * without end behind a slow stream or a burst. The bound cannot help while a statement runs:
 * PGlite runs it on the main thread, so no timer fires until it returns.
 */
class SessionGate {
  private held = false;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly waitMs: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  stats(): PoolStats {
    return { inUse: this.held ? 1 : 0, waiting: this.waiting.length, shared: 0 };
  }

  private acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(grant), 1);
        reject(new StoreBusyError(this.waitMs));
      }, this.waitMs);
      this.waiting.push(grant);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

export interface PgliteOptions {
  dataDir?: string;
  /** A data directory dump to start from (tests start from a migrated snapshot). */
  loadDataDir?: Blob;
  /** How long a request may wait for the session (PDS_EMBEDDED_WAIT_MS). */
  waitMs: number;
}

export async function openPgliteStore(options: PgliteOptions): Promise<Store & { dump(): Promise<Blob> }> {
  // Parameters are text for PostgreSQL's input functions; PGlite's own boolean serialiser would
  // throw on a value PostgreSQL should reject with 22P02.
  const db = await PGlite.create({ dataDir: options.dataDir, loadDataDir: options.loadDataDir, serializers: { 16: String } });
  const base = queryableOf(db);
  const gate = new SessionGate(options.waitMs);
  const transaction: Store['transaction'] = (fn, transactionOptions = {}) => gate.run(() => db.transaction(async (tx) => {
    const preamble = transactionPreamble(transactionOptions);
    if (preamble) await tx.exec(`set transaction ${preamble}`);
    if (transactionOptions.settings) await tx.exec(transactionOptions.settings);
    return fn(queryableOf(tx));
  }));
  return {
    query: (text, params) => gate.run(() => base.query(text, params)),
    exec: (text) => gate.run(() => base.exec(text)),
    queryColumns: (text, params) => gate.run(() => base.queryColumns(text, params)),
    transaction,
    queryInTransaction: (text, params, transactionOptions) => transaction((tx) => tx.query(text, params), transactionOptions),
    readAsReader: (binding, form, text, params) => transaction((tx) => sendStatement(tx, form, text, params), binding.transaction),
    isDistributed: async () => false,
    transactionConnections: 1,
    poolStats: () => gate.stats(),
    async close() {
      if (!db.closed) await db.close();
    },
    async dump() {
      return (await db.dumpDataDir('gzip')) as Blob;
    },
  };
}
