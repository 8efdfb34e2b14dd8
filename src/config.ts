/** Settings, read once from the environment (decisions D8). */
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

export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
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
    statementTimeoutMs: intSetting(env, 'PDS_STATEMENT_TIMEOUT_MS', 5000),
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
