/**
 * Opens the store the settings name. Each backend's module is loaded only when chosen, so PGlite's
 * WebAssembly is not loaded for a server; both import src/db/store.ts, so this is not there.
 */
import { DEFAULT_MAX_CONNECTIONS, type Store, type StoreTimeouts } from './store.ts';

/** Opens the backend the settings name: a server when a URL is given, else PGlite in `dataDir`. */
export async function openStore(settings: { databaseUrl?: string; dataDir?: string; maxConnections?: number; timeouts?: StoreTimeouts; readerSessions?: boolean; citusReadNodes?: boolean; embeddedWaitMs: number }): Promise<Store> {
  if (settings.databaseUrl) {
    const { openPostgresStore } = await import('./postgres-store.ts');
    return openPostgresStore(settings.databaseUrl, settings.maxConnections ?? DEFAULT_MAX_CONNECTIONS, settings.timeouts, { readerSessions: settings.readerSessions, citusReadNodes: settings.citusReadNodes });
  }
  const { openPgliteStore } = await import('./pglite-store.ts');
  return openPgliteStore({ dataDir: settings.dataDir, waitMs: settings.embeddedWaitMs });
}
