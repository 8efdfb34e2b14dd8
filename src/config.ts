/**
 * Every setting, read once from the environment: its variable, its default and what it means, in
 * one table. The README's configuration table is generated from it (tools/docs.ts).
 */
import { DEFAULT_MAX_CONNECTIONS, DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_STORE_TIMEOUTS, STATEMENT_TIMEOUT_GRACE_MS } from './db/store.ts';

type Env = Readonly<Record<string, string | undefined>>;
/** The settings read so far, by name. */
type SettingsRead = Readonly<Record<string, unknown>>;

interface Setting<T> {
  readonly env: string;
  /** The default as the documentation shows it. */
  readonly shown: string;
  readonly meaning: string;
  /** `read` so far: a default may follow from a setting read before it. */
  read(raw: string | undefined, read: SettingsRead): T;
}

const given = (raw: string | undefined): raw is string => raw !== undefined && raw !== '';

function integer(env: string, fallback: number | ((read: SettingsRead) => number), meaning: string, shown = String(fallback)): Setting<number> {
  return {
    env, meaning, shown,
    read(raw, read) {
      if (!given(raw)) return typeof fallback === 'number' ? fallback : fallback(read);
      const value = Number(raw);
      if (!Number.isInteger(value) || value <= 0) throw new Error(`${env} must be a positive integer, got "${raw}"`);
      return value;
    },
  };
}

const LARGEST_PORT = 65_535;

/** A TCP port: 1 to LARGEST_PORT. */
function port(env: string, fallback: number, meaning: string): Setting<number> {
  const whole = integer(env, fallback, meaning);
  return {
    ...whole,
    read(raw, read) {
      const value = whole.read(raw, read);
      if (value > LARGEST_PORT) throw new Error(`${env} must be a port from 1 to ${LARGEST_PORT}, got "${raw}"`);
      return value;
    },
  };
}

/** A PostgreSQL connection URL (postgres:// or postgresql://, as postgres.js reads them). */
const postgresUrl = (env: string, meaning: string): Setting<string | undefined> => ({
  env, meaning, shown: 'unset',
  read(raw) {
    if (!given(raw)) return undefined;
    const protocol = URL.canParse(raw) ? new URL(raw).protocol : null;
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
      throw new Error(`${env} must be a PostgreSQL URL such as postgres://user:password@host:5432/database, got one ${protocol ? `of scheme ${protocol}` : 'that does not parse'}`);
    }
    return raw;
  },
});

const text = (env: string, fallback: string, meaning: string): Setting<string> =>
  ({ env, meaning, shown: `\`${fallback}\``, read: (raw) => (given(raw) ? raw : fallback) });

const optional = (env: string, meaning: string): Setting<string | undefined> =>
  ({ env, meaning, shown: 'unset', read: (raw) => (given(raw) ? raw : undefined) });

/** A comma-separated list of exact origins (`https://app.example`); each must be an origin and nothing more. */
const origins = (env: string, meaning: string): Setting<string[] | undefined> => ({
  env, meaning, shown: 'unset',
  read(raw) {
    if (!given(raw)) return undefined;
    const list = raw.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '');
    for (const origin of list) {
      if (!URL.canParse(origin) || new URL(origin).origin !== origin) throw new Error(`${env} must list origins such as https://app.example, got "${origin}"`);
    }
    return list;
  },
});

function onOff(env: string, fallback: boolean, meaning: string): Setting<boolean> {
  return {
    env, meaning, shown: fallback ? '`on`' : '`off`',
    read(raw) {
      if (!given(raw)) return fallback;
      if (raw !== 'on' && raw !== 'off') throw new Error(`${env} must be "on" or "off", got "${raw}"`);
      return raw === 'on';
    },
  };
}

export const SETTINGS = {
  port: port('PORT', 8080, 'HTTP port'),
  host: text('HOST', '127.0.0.1', 'listen address'),
  databaseUrl: postgresUrl('DATABASE_URL', 'PostgreSQL 15+ server; unset means the embedded PGlite'),
  dataDir: text('PDS_DATA_DIR', './.pds-data', 'PGlite\'s data folder, locked by one process at a time (`pds.lock`)'),
  adminKey: optional('PDS_ADMIN_KEY', 'enables the operator API `/admin/v1` with this bearer key'),
  metricsKey: optional('PDS_METRICS_KEY', 'when set, `GET /metrics` needs `Authorization: Bearer` this key; unset, it is open'),
  redisUrl: optional('REDIS_URL', 'share rate-limit counts between instances through Redis'),
  trustProxy: optional('PDS_TRUST_PROXY', 'the load balancers\' addresses or CIDR ranges, comma-separated: their `X-Forwarded-For` names the source IP the limits count; unset, the TCP peer is the source'),
  readLimitPerMin: integer('PDS_READ_LIMIT_PER_MIN', 600, 'list requests per minute per source IP'),
  writeLimitPerMin: integer('PDS_WRITE_LIMIT_PER_MIN', 60, 'write requests per minute per token'),
  authFailureLimitPerMin: integer('PDS_AUTH_FAILURE_LIMIT_PER_MIN', 600, 'failed authentications (token, operator or metrics key) per minute per source IP; then 429 before any lookup'),
  demo: { env: 'PDS_DEMO', shown: 'on', meaning: 'a new embedded store gets demo data; `0` skips', read: (raw: string | undefined) => raw !== '0' } satisfies Setting<boolean>,
  logLevel: text('LOG_LEVEL', 'info', 'pino log level; logs are JSON lines on standard output, one `request completed` line per request at `info`'),
  statementTimeoutMs: integer('PDS_STATEMENT_TIMEOUT_MS', DEFAULT_STATEMENT_TIMEOUT_MS, 'statement time, enforced by PostgreSQL (503 `QUERY_TIMEOUT`); PGlite cannot interrupt a query'),
  plannedCounts: onOff('PDS_PLANNED_COUNTS', true, '`off`: `Prefer: count=planned`/`estimated` answer exact counts (never planner statistics)'),
  embeddedWaitMs: integer('PDS_EMBEDDED_WAIT_MS', 5_000, 'PGlite only: how long a request waits for the one session before 503 `DATABASE_BUSY`'),
  dbMaxConnections: integer('PDS_DB_MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 'PostgreSQL connections per instance in each of its two pools: partner reads (reader sessions), everything else'),
  readerSessions: onOff('PDS_READER_SESSIONS', true, '`off`: partner reads set role and scope per transaction like every other statement, for a pooler that shares server sessions between clients (PgBouncer in transaction mode); `on` needs sessions of the service\'s own (docs/scaling.md)'),
  citusReadNodes: onOff('PDS_CITUS_READ_NODES', true, 'Citus only: a partner read goes to the node holding its universities\' shards (its address from `pg_dist_node`, user, password and database from `DATABASE_URL`); `off`: every statement goes through the coordinator (docs/scaling.md)'),
  dbConnectTimeoutMs: integer('PDS_DB_CONNECT_TIMEOUT_MS', DEFAULT_STORE_TIMEOUTS.connectTimeoutMs, 'TCP connect, then startup and authentication, each within this'),
  dbPoolWaitMs: integer('PDS_DB_POOL_WAIT_MS', DEFAULT_STORE_TIMEOUTS.poolWaitMs, 'longest wait for a free connection'),
  // The server cancels a slow statement (57014) a second before the client would give up.
  dbWaitMs: integer('PDS_DB_WAIT_MS', (read) => Number(read.statementTimeoutMs) + STATEMENT_TIMEOUT_GRACE_MS,
    'longest time one transaction waits for the store\'s answers; then its connection is destroyed', `statement timeout + ${STATEMENT_TIMEOUT_GRACE_MS}`),
  readyTimeoutMs: integer('PDS_READY_TIMEOUT_MS', 1_000, 'how long `/readyz` waits for the store'),
  requestTimeoutMs: integer('PDS_REQUEST_TIMEOUT_MS', 30_000, 'the whole request, headers and body, must arrive within this; else 408 and the socket closes'),
  headersTimeoutMs: integer('PDS_HEADERS_TIMEOUT_MS', 10_000, 'the request line and headers must arrive within this (at most the request timeout); else 408'),
  idleTimeoutMs: integer('PDS_IDLE_TIMEOUT_MS', 30_000, 'a socket with no traffic either way for this long is closed; one whose request body stopped arriving is answered 408 first'),
  keepAliveTimeoutMs: integer('PDS_KEEP_ALIVE_TIMEOUT_MS', 5_000, 'an idle keep-alive connection is closed after this; behind a load balancer, set it above the balancer\'s idle timeout'),
  maxConnections: integer('PDS_MAX_CONNECTIONS', 1_000, 'open client connections per instance; more are refused at accept'),
  corsOrigins: origins('PDS_CORS_ORIGINS', 'comma-separated exact origins a browser may call `/v1` from (CORS); unset: any origin'),
};

export type Config = { -readonly [K in keyof typeof SETTINGS]: ReturnType<(typeof SETTINGS)[K]['read']> };

export function readConfig(env: Env = process.env): Config {
  const read: Record<string, unknown> = {};
  for (const [name, setting] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) read[name] = setting.read(env[setting.env], read);
  const config = read as Config;
  // Node refuses a headers timeout above the request timeout.
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new Error(`PDS_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed PDS_REQUEST_TIMEOUT_MS (${config.requestTimeoutMs})`);
  }
  return config;
}

/** Every setting's default, for callers (tests) that give only some settings. */
export const CONFIG_DEFAULTS: Config = readConfig({});
