/**
 * `npm start`: opens the store (PGlite in PDS_DATA_DIR unless DATABASE_URL is set), migrates
 * it, fills a new embedded store with demo data, serves, and prints how to call the service.
 */
import { readConfig } from './config.ts';
import { Database } from './db/database.ts';
import { demoExists, loadDemoData } from './db/demo-data.ts';
import { type DemoUniversity, issueDemoStartTokens } from './domain/demo.ts';
import { migrate } from './db/migrate.ts';
import { openStore } from './db/store.ts';
import { buildApp } from './http/app.ts';

const config = readConfig();
const store = await openStore({
  databaseUrl: config.databaseUrl, dataDir: config.dataDir, embeddedWaitMs: config.embeddedWaitMs,
  maxConnections: config.maxConnections, timeouts: config.storeTimeouts,
});
await migrate(store);
const db = new Database(store, config.statementTimeoutMs);

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

const app = await buildApp(config, db);
await app.listen({ port: config.port, host: config.host });
const baseUrl = `http://${config.host}:${config.port}`;

const banner = [
  '',
  `Partner data service on ${baseUrl} (${config.databaseUrl ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`})`,
  `OpenAPI: ${baseUrl}/v1/openapi.json`,
];
if (demo) {
  banner.push(
    `Demo university: ${demo.name}`,
    `  read token:  ${demo.read_token}`,
    `  write token: ${demo.write_token}`,
    'Try:',
    `  curl -H "Authorization: Bearer ${demo.read_token}" "${baseUrl}/v1/students?select=id,email,first_name,last_name&order=last_name&limit=5"`,
  );
}
if (!config.adminKey) banner.push('The operator API (/admin/v1) is off; set PDS_ADMIN_KEY to enable it.');
process.stdout.write(`${banner.join('\n')}\n\n`);

let closing = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, async () => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await store.close();
    process.exit(0);
  });
}
