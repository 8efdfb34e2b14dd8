import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PostgresError } from 'pg-error-enum';
import { isDatabaseError, type Store } from './store.ts';

/** Migrations rewrite whole tables and wait for another instance's migration: far longer than a request. */
const MIGRATION_STORE_WAIT_MS = 15 * 60_000;


const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Any constant works; it only has to be the same for every instance. */
const MIGRATION_LOCK_KEY = '7263519041';

/** The migration files in the order they apply (by name), once read. */
let shippedFiles: Promise<string[]> | undefined;

/**
 * The migration files of the release this process runs, read once: its code and its schema go
 * together. Read again at every readiness probe, a newer release's files copied over a running
 * install made every instance still running the old code report a pending migration it would
 * never apply (503 NOT_READY), and leave its load balancer before it was restarted.
 */
function migrationFiles(): Promise<string[]> {
  shippedFiles ??= readdir(migrationsDir).then((files) => files.filter((f) => f.endsWith('.sql')).sort());
  return shippedFiles;
}

/** The migration files not applied to the store yet; all of them on a store never migrated. */
export async function pendingMigrations(store: Store): Promise<string[]> {
  const [{ applied }] = await store.query<{ applied: string | null }>(
    `select (select string_agg(name, '/') from pds_migrations) as applied`,
  ).catch((error) => {
    // A store never migrated has no pds_migrations.
    if (isDatabaseError(error) && error.code === PostgresError.UNDEFINED_TABLE) return [{ applied: null }];
    throw error;
  });
  const names = new Set(applied?.split('/'));
  return (await migrationFiles()).filter((f) => !names.has(f));
}

/**
 * Applies the pending `.sql` files in name order, in one transaction under an advisory lock,
 * so two instances starting together never apply a file twice or see a half-applied schema.
 * `through` (a file name) stops after that file: the test of a database migrating forward
 * builds one as an older release left it.
 */
export async function migrate(store: Store, options: { through?: string } = {}): Promise<string[]> {
  const all = await migrationFiles();
  const { through } = options;
  if (through !== undefined && !all.includes(through)) throw new Error(`no migration ${through}`);
  const files = through === undefined ? all : all.filter((f) => f <= through);
  return store.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await tx.exec(`create table if not exists pds_migrations (
      name text primary key, applied_at timestamptz not null default now())`);
    const applied = new Set((await tx.query<{ name: string }>('select name from pds_migrations')).map((r) => r.name));
    const pending = files.filter((f) => !applied.has(f));
    for (const file of pending) {
      await tx.exec(await readFile(migrationsDir + file, 'utf8'));
      await tx.query('insert into pds_migrations (name) values ($1)', [file]);
    }
    return pending;
  }, { storeWaitMs: MIGRATION_STORE_WAIT_MS });
}
