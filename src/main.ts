/**
 * `npm start`: checks that the port can be bound, locks the embedded data folder, opens the store
 * (PGlite in PDS_DATA_DIR unless DATABASE_URL is set), migrates it, binds the port, then fills a
 * new embedded store with demo data and prints how to call the service on standard error
 * (standard output is JSON log lines only). A start that cannot have the port says so in one line
 * and exits 1 before it writes anything; one that cannot have the folder, before it opens the store;
 * so does one that cannot read a setting, whose PostgreSQL server cannot be reached or refuses it, or
 * whose Redis server refuses the database REDIS_URL names.
 */
import { createServer, isIPv6 } from 'node:net';
import { constants } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { type Config, STRONG_KEY_CHARS, SettingRefused, readConfig } from './config.ts';
import { DataDirInUseError, lockDataDir } from './db/data-dir-lock.ts';
import { StoreUnavailableError, isDatabaseError } from './db/store.ts';
import type { DemoUniversity } from './domain/demo.ts';
import { OPENAPI_PATH, OPERATOR_PREFIX, PARTNER_PREFIX } from './http/prefixes.ts';

function refuseToStart(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** The one line for an address this process cannot listen on; other errors are not the address's. */
function listenRefusal(error: unknown, config: { port: number; host: string }): string | null {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return `Port ${config.port} on ${config.host} is in use by another process; stop it or set PORT to a free port.`;
  // A HOST that names no address (ENOTFOUND) was Node's own line, which named neither HOST nor PORT.
  if (code === 'EACCES' || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return `Cannot listen on ${config.host}:${config.port} (${code}); set PORT and HOST to an address this process may use.`;
  return null;
}

/** Binds the address and lets it go: a start that could not serve stops before it creates or migrates a store. */
async function checkAddress(config: { port: number; host: string }): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(config.port, config.host, resolve));
  } catch (error) {
    refuseToStart(listenRefusal(error, config) ?? String(error));
  }
  await new Promise((resolve) => probe.close(resolve));
}

/**
 * The one line for a PostgreSQL server that cannot be reached or refuses the service (what a
 * request would answer DATABASE_UNAVAILABLE: src/http/sqlstates.ts); null for anything else,
 * such as a migration's own fault, which keeps its stack.
 */
async function serverRefusal(error: unknown, databaseUrl: string | undefined): Promise<string | null> {
  const { databaseErrorToApiError } = await import('./http/sqlstates.ts');
  if (!databaseUrl || databaseErrorToApiError(error)?.code !== 'DATABASE_UNAVAILABLE') return null;
  // The host only: the URL may hold a password.
  const where = `the PostgreSQL server at ${new URL(databaseUrl).host}`;
  if (error instanceof StoreUnavailableError) {
    return `Cannot start: ${where} is unavailable (${error.code}); check DATABASE_URL and that the server accepts connections.`;
  }
  return isDatabaseError(error) ? `Cannot start: ${where} refused the service: ${error.message} (SQLSTATE ${error.code}).` : null;
}

let config: Config;
try {
  config = readConfig();
} catch (error) {
  refuseToStart(`Cannot start: ${(error as Error).message}.`);
}
await checkAddress(config);
if (!config.databaseUrl) {
  try {
    lockDataDir(config.dataDir);
  } catch (error) {
    if (error instanceof DataDirInUseError) refuseToStart(error.message);
    const code = (error as NodeJS.ErrnoException).code;
    // A folder the service may not write, or under a file: one line, as any setting it cannot use.
    if (code) refuseToStart(`Cannot start: PDS_DATA_DIR ${config.dataDir} cannot be used as the data folder (${code}).`);
    throw error;
  }
}
// The service's modules load once the settings, the address and the folder are known to be
// usable: loading them took 2 s of a 2-core VM, which a start that refuses a setting now spares.
const [{ Database }, { demoExists, loadDemoData }, { issueDemoStartTokens }, { migrate }, { openStore }, { buildApp }] = await Promise.all([
  import('./db/database.ts'), import('./domain/demo-data.ts'), import('./domain/demo.ts'), import('./db/migrate.ts'), import('./db/open-store.ts'),
  import('./http/app.ts'),
]);
const store = await openStore({
  databaseUrl: config.databaseUrl, dataDir: config.dataDir, embeddedWaitMs: config.embeddedWaitMs,
  maxConnections: config.dbMaxConnections, readerSessions: config.readerSessions, citusReadNodes: config.citusReadNodes,
  timeouts: { connectTimeoutMs: config.dbConnectTimeoutMs, poolWaitMs: config.dbPoolWaitMs, storeWaitMs: config.dbWaitMs },
});
try {
  await migrate(store);
} catch (error) {
  const refusal = await serverRefusal(error, config.databaseUrl);
  if (!refusal) throw error;
  await store.close();
  refuseToStart(refusal);
}
const db = new Database(store, config.statementTimeoutMs);

// The port is bound before demo tokens are issued, so a start whose address was taken after
// checkAddress revokes none of the running instance's (migrations are idempotent).
let app: FastifyInstance | undefined;
try {
  app = await buildApp(config, db);
  await app.listen({ port: config.port, host: config.host });
} catch (error) {
  // A server a setting names may refuse it only as the plugins load (the Redis database).
  const refusal = error instanceof SettingRefused ? `Cannot start: ${error.message}.` : listenRefusal(error, config);
  if (!refusal) throw error;
  await app?.close();
  await store.close();
  refuseToStart(refusal);
}

let demo: DemoUniversity | null = null;
if (!config.databaseUrl && config.demo) {
  // A new store gets the demo data set; every start prints fresh tokens and revokes the last ones.
  demo = await db.asOperator(async (tx) => {
    if (!(await demoExists(tx))) {
      const [anyUniversity] = await tx.query('select 1 from universities limit 1');
      if (anyUniversity) return null;
      await loadDemoData(tx);
    }
    return issueDemoStartTokens(tx);
  });
}

// An IPv6 address is bracketed in a URL (RFC 3986): `http://::1:8080` is no URL, and curl refused the line printed with it.
const baseUrl = `http://${isIPv6(config.host) ? `[${config.host}]` : config.host}:${config.port}`;

/** After the shutdown limit, how long the store's close may take before the process exits 1. */
const SHUTDOWN_CLOSE_MS = 5_000;

const banner = [
  '',
  `Partner data service on ${baseUrl} (${config.databaseUrl ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`})`,
  `OpenAPI: ${baseUrl}${PARTNER_PREFIX}${OPENAPI_PATH}`,
];
if (demo) {
  banner.push(
    `Demo university: ${demo.name}`,
    `  read token:  ${demo.read_token}`,
    `  write token: ${demo.write_token}`,
    'Try:',
    `  curl -H "Authorization: Bearer ${demo.read_token}" "${baseUrl}${PARTNER_PREFIX}/students?select=id,email,first_name,last_name&order=last_name&limit=5"`,
  );
} else {
  // No demo tokens to print (a server's store, or PDS_DEMO=off): say where tokens come from.
  banner.push(`No demo tokens printed: issue tokens with the operator API${config.adminKey ? '' : ' (set PDS_ADMIN_KEY to enable it)'}, `
    + `POST ${OPERATOR_PREFIX}/universities and ${OPERATOR_PREFIX}/tokens, or POST ${OPERATOR_PREFIX}/demo for the demo set.`);
}
if (!config.adminKey) banner.push(`The operator API (${OPERATOR_PREFIX}) is off; set PDS_ADMIN_KEY to enable it.`);
else if (config.adminKey.length < STRONG_KEY_CHARS) {
  banner.push(`PDS_ADMIN_KEY is ${config.adminKey.length} characters: anyone reaching the port may try keys at the failed-authentication rate; `
    + `use ${STRONG_KEY_CHARS} or more random characters (openssl rand -base64 32).`);
}
process.stderr.write(`${banner.join('\n')}\n\n`);

let closing = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    // A second signal, of either kind, is an operator's "now", as a second Ctrl-C is: a SIGINT
    // after a SIGTERM was ignored for the whole shutdown wait, a second SIGTERM ended the process
    // without a word. A write cut here rolls back whole.
    if (closing) {
      app.log.warn({ signal }, 'a second signal during the shutdown: exiting now; requests in progress are cut');
      process.exit(128 + constants.signals[signal]);
    }
    closing = true;
    app.log.info({ signal }, 'shutting down');
    // A page streamed to a slow client held the shutdown for minutes (a 12 MB page at 80 KB/s:
    // 167 s), past any orchestrator's grace period, whose SIGKILL would cut it all the same.
    const limit = setTimeout(() => {
      app.log.warn({ shutdownTimeoutMs: config.shutdownTimeoutMs }, 'requests still in progress at the shutdown limit; their connections are closed');
      app.server.closeAllConnections();
    }, config.shutdownTimeoutMs).unref();
    // Closing the store gets a few seconds more; a close that hangs ends with the process.
    setTimeout(() => {
      app.log.error('the shutdown did not finish; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + SHUTDOWN_CLOSE_MS).unref();
    await app.close();
    clearTimeout(limit);
    await store.close();
    process.exit(0);
  });
}
