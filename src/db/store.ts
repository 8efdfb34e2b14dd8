/**
 * The one database adapter. Two backends share it: a PostgreSQL server through postgres.js,
 * and embedded PGlite. Callers see only `query`, `exec` and `transaction`; all SQL is plain
 * text with `$n` parameters, so the same statements run on both.
 */
export type Row = Record<string, unknown>;

export interface Queryable {
  /** One parameterised statement. Parameters are strings or null, sent untyped. */
  query<T = Row>(text: string, params?: readonly (string | null)[]): Promise<T[]>;
  /** Several statements without parameters (migrations, fixed SQL). */
  exec(text: string): Promise<void>;
  /**
   * The first column of each row, unparsed: raw bytes where the driver can hand them over
   * without decoding (postgres.js), text otherwise (PGlite).
   */
  firstColumn(text: string): Promise<(string | Uint8Array)[]>;
}

export interface TransactionOptions {
  isolation?: 'read committed' | 'repeatable read';
  readOnly?: boolean;
}

export interface Store extends Queryable {
  readonly backend: 'postgres' | 'pglite';
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  close(): Promise<void>;
}

/** The fields every database error carries on both backends. */
export interface DatabaseError extends Error {
  code: string;
  detail?: string;
  hint?: string;
}

/** The table and constraint a violation names; postgres.js and PGlite spell the fields differently. */
export function violatedConstraint(error: DatabaseError): { table: string; constraint: string } | null {
  const fields = error as { table?: string; table_name?: string; constraint?: string; constraint_name?: string };
  const table = fields.table_name ?? fields.table;
  const constraint = fields.constraint_name ?? fields.constraint;
  return table && constraint ? { table, constraint } : null;
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

/** Opens the backend the settings name: a server when a URL is given, else PGlite in `dataDir`. */
export async function openStore(settings: { databaseUrl?: string; dataDir?: string; maxConnections?: number; embeddedWaitMs: number }): Promise<Store> {
  if (settings.databaseUrl) {
    const { openPostgresStore } = await import('./postgres-store.ts');
    return openPostgresStore(settings.databaseUrl, settings.maxConnections ?? 10);
  }
  const { openPgliteStore } = await import('./pglite-store.ts');
  return openPgliteStore({ dataDir: settings.dataDir, waitMs: settings.embeddedWaitMs });
}
