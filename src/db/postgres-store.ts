import postgres from 'postgres';
import { type Queryable, type Store, transactionPreamble } from './store.ts';

function queryableOf(sql: postgres.Sql | postgres.ReservedSql): Queryable {
  return {
    async query<T>(text: string, params: readonly (string | null)[] = []) {
      return (await sql.unsafe(text, params as (string | null)[], { prepare: true })) as unknown as T[];
    },
    async exec(text: string) {
      await sql.unsafe(text);
    },
    async firstColumn(text: string) {
      const rows = await sql.unsafe(text).raw();
      return rows.map((row) => row[0] as Uint8Array);
    },
  };
}

/**
 * Parameters are always text for PostgreSQL's own input functions to read. postgres.js would
 * otherwise re-serialise them by the described parameter type: the string 'true' would become
 * 'f', and JSON text would be quoted a second time.
 */
const textParameters = {
  boolean: { to: 16, from: [16], serialize: String, parse: (x: string) => x === 't' },
  json: { to: 114, from: [114, 3802], serialize: String, parse: (x: string) => JSON.parse(x) },
  date: { to: 1184, from: [1082, 1114, 1184], serialize: String, parse: (x: string) => new Date(x) },
};

function connectionLost(error: unknown): boolean {
  const code = String((error as { code?: unknown })?.code ?? '');
  return code.startsWith('CONNECTION_') || code.startsWith('08') || code.startsWith('57P') || code === 'ECONNRESET';
}

export function openPostgresStore(url: string, maxConnections: number): Store {
  const sql = postgres(url, {
    max: maxConnections,
    onnotice: () => {},
    types: textParameters,
    connection: { application_name: 'partner-data-service' },
  });
  const base = queryableOf(sql);
  return {
    backend: 'postgres',
    query: base.query,
    exec: base.exec,
    firstColumn: base.firstColumn,
    /**
     * On a reserved connection, BEGIN is not awaited: it travels in one pipeline with the
     * callback's first statements, so a one-query read costs two round trips, not four.
     */
    async transaction(fn, options = {}) {
      const connection = await sql.reserve();
      let lost = false;
      try {
        const begin = connection.unsafe(`begin ${transactionPreamble(options)}`);
        begin.catch(() => {});
        const result = await fn(queryableOf(connection));
        await begin;
        await connection.unsafe('commit');
        return result;
      } catch (error) {
        lost = connectionLost(error);
        if (!lost) await connection.unsafe('rollback').catch(() => {});
        throw error;
      } finally {
        // A connection the server dropped has rolled back already, and the pool has taken it
        // back as closed: releasing it would hand the dead socket to the next query.
        if (!lost) connection.release();
      }
    },
    async close() {
      await sql.end({ timeout: 5 });
    },
  };
}
