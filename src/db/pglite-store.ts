import { PGlite, type Transaction } from '@electric-sql/pglite';
import { type Queryable, type Store, transactionPreamble } from './store.ts';

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
    firstColumn(text: string) {
      return inOrder(async () => (await db.query<unknown[]>(text, [], { rowMode: 'array' })).rows.map((row) => row[0] as string));
    },
  };
}

export async function openPgliteStore(dataDir?: string, loadDataDir?: Blob): Promise<Store & { dump(): Promise<Blob> }> {
  // Parameters are text for PostgreSQL's input functions; PGlite's own boolean serialiser would
  // throw on a value PostgreSQL should reject with 22P02.
  const db = await PGlite.create({ dataDir, loadDataDir, serializers: { 16: String } });
  const base = queryableOf(db);
  return {
    backend: 'pglite',
    query: base.query,
    exec: base.exec,
    firstColumn: base.firstColumn,
    async transaction(fn, options = {}) {
      return db.transaction(async (tx) => {
        const preamble = transactionPreamble(options);
        if (preamble) await tx.exec(`set transaction ${preamble}`);
        return fn(queryableOf(tx));
      });
    },
    async close() {
      if (!db.closed) await db.close();
    },
    async dump() {
      return (await db.dumpDataDir('gzip')) as Blob;
    },
  };
}
