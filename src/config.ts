/** Settings, read once from the environment (decisions D8). */
import { DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_STORE_TIMEOUTS, STATEMENT_TIMEOUT_GRACE_MS, type StoreTimeouts } from './db/store.ts';

/** How long /readyz waits for the store before it answers 503. */
export const DEFAULT_READY_TIMEOUT_MS = 1_000;

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  dataDir: string;
  adminKey: string | undefined;
  redisUrl: string | undefined;
  readLimitPerMin: number;
  writeLimitPerMin: number;
  /** Failed authentications (partner token or operator key) per minute per source IP. */
  authFailureLimitPerMin: number;
  demo: boolean;
  statementTimeoutMs: number;
  /** How long a request waits for PGlite's one session before it is answered 503. */
  embeddedWaitMs: number;
  /** Off: `Prefer: count=planned|estimated` are answered with exact counts. */
  plannedCounts: boolean;
  /** PostgreSQL connections this instance opens at most. */
  dbMaxConnections: number;
  storeTimeouts: StoreTimeouts;
  readyTimeoutMs: number;
  logLevel: string;
  /** The whole request, headers and body, must arrive within this; else 408 and the socket closes. */
  requestTimeoutMs: number;
  /** The request line and headers must arrive within this; else 408. */
  headersTimeoutMs: number;
  /** A socket with no traffic either way for this long is closed (also during a response). */
  idleTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** Open connections above this are refused at accept. */
  maxConnections: number;
}

function intSetting(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

function onOffSetting(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== 'on' && raw !== 'off') throw new Error(`${name} must be "on" or "off", got "${raw}"`);
  return raw === 'on';
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const statementTimeoutMs = intSetting(env, 'PDS_STATEMENT_TIMEOUT_MS', DEFAULT_STATEMENT_TIMEOUT_MS);
  const config: Config = {
    port: intSetting(env, 'PORT', 8080),
    host: env.HOST || '127.0.0.1',
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.PDS_DATA_DIR || './.pds-data',
    adminKey: env.PDS_ADMIN_KEY || undefined,
    redisUrl: env.REDIS_URL || undefined,
    readLimitPerMin: intSetting(env, 'PDS_READ_LIMIT_PER_MIN', 600),
    writeLimitPerMin: intSetting(env, 'PDS_WRITE_LIMIT_PER_MIN', 60),
    authFailureLimitPerMin: intSetting(env, 'PDS_AUTH_FAILURE_LIMIT_PER_MIN', 30),
    demo: env.PDS_DEMO !== '0',
    embeddedWaitMs: intSetting(env, 'PDS_EMBEDDED_WAIT_MS', 5000),
    plannedCounts: onOffSetting(env, 'PDS_PLANNED_COUNTS', true),
    statementTimeoutMs,
    dbMaxConnections: intSetting(env, 'PDS_DB_MAX_CONNECTIONS', 10),
    storeTimeouts: {
      connectTimeoutMs: intSetting(env, 'PDS_DB_CONNECT_TIMEOUT_MS', DEFAULT_STORE_TIMEOUTS.connectTimeoutMs),
      poolWaitMs: intSetting(env, 'PDS_DB_POOL_WAIT_MS', DEFAULT_STORE_TIMEOUTS.poolWaitMs),
      // The server cancels a slow statement (57014) a second before the client would give up.
      storeWaitMs: intSetting(env, 'PDS_DB_WAIT_MS', statementTimeoutMs + STATEMENT_TIMEOUT_GRACE_MS),
    },
    readyTimeoutMs: intSetting(env, 'PDS_READY_TIMEOUT_MS', DEFAULT_READY_TIMEOUT_MS),
    logLevel: env.LOG_LEVEL || 'info',
    requestTimeoutMs: intSetting(env, 'PDS_REQUEST_TIMEOUT_MS', 30_000),
    headersTimeoutMs: intSetting(env, 'PDS_HEADERS_TIMEOUT_MS', 10_000),
    idleTimeoutMs: intSetting(env, 'PDS_IDLE_TIMEOUT_MS', 30_000),
    keepAliveTimeoutMs: intSetting(env, 'PDS_KEEP_ALIVE_TIMEOUT_MS', 5_000),
    maxConnections: intSetting(env, 'PDS_MAX_CONNECTIONS', 1_000),
  };
  // Node refuses a headers timeout above the request timeout.
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new Error(`PDS_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed PDS_REQUEST_TIMEOUT_MS (${config.requestTimeoutMs})`);
  }
  return config;
}

/** Every setting's default, for callers (tests) that give only some settings. */
export const CONFIG_DEFAULTS: Config = readConfig({});
