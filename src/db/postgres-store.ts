import postgres from 'postgres';
import { type Queryable, type Store, transactionPreamble } from './store.ts';

function queryableOf(sql: postgres.Sql | postgres.TransactionSql): Queryable {
  return {
    async query<T>(text: string, params: readonly (string | null)[] = []) {
      return (await sql.unsafe(text, params as (string | null)[], { prepare: true })) as unknown as T[];
    },
    async exec(text: string) {
      await sql.unsafe(text);
    },
  };
}

export function openPostgresStore(url: string, maxConnections: number): Store {
  const sql = postgres(url, {
    max: maxConnections,
    onnotice: () => {},
    connection: { application_name: 'partner-data-service' },
  });
  const base = queryableOf(sql);
  return {
    backend: 'postgres',
    query: base.query,
    exec: base.exec,
    async transaction(fn, options = {}) {
      return (await sql.begin(transactionPreamble(options), (tx) => fn(queryableOf(tx)))) as Awaited<ReturnType<typeof fn>>;
    },
    async close() {
      await sql.end({ timeout: 5 });
    },
  };
}
