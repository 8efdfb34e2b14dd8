/**
 * Every setting, read once from the environment: its variable, its default and what it means, in
 * one table. The README's configuration table is generated from it (tools/docs.ts).
 */
import { isIP } from 'node:net';
import { LIMITS } from './limits.ts';
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

function integer(env: string, fallback: number | ((read: SettingsRead) => number), meaning: string, shown = String(fallback), largest = Number.MAX_SAFE_INTEGER): Setting<number> {
  return {
    env, meaning, shown,
    read(raw, read) {
      if (!given(raw)) return typeof fallback === 'number' ? fallback : fallback(read);
      const value = Number(raw);
      if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0) throw new Error(`${env} must be a positive integer, got "${raw}"`);
      if (value > largest) throw new Error(`${env} must be at most ${largest}, got "${raw}"`);
      return value;
    },
  };
}

/**
 * The longest time a setting may give: Node's timers take at most 2^31 − 1 ms (a longer one fires
 * at once, so a wait of 99999999999 ms failed every request), and so does PostgreSQL's
 * statement_timeout.
 */
const LONGEST_MS = 2_147_483_647;

/** A time in milliseconds, from 1 to `largest`. */
const milliseconds = (env: string, fallback: number | ((read: SettingsRead) => number), meaning: string, shown = String(fallback), largest = LONGEST_MS) =>
  integer(env, fallback, meaning, shown, largest);

const LARGEST_PORT = 65_535;

/** A TCP port: 1 to LARGEST_PORT. */
const port = (env: string, fallback: number, meaning: string) => integer(env, fallback, meaning, String(fallback), LARGEST_PORT);

/** A server's URL of one of `protocols`, as its driver reads them; `example` shows one. */
const serverUrl = (
  env: string, meaning: string, server: string, protocols: readonly string[], example: string,
  pathProblem: (path: string) => string | null = () => null,
): Setting<string | undefined> => ({
  env, meaning, shown: 'unset',
  read(raw) {
    if (!given(raw)) return undefined;
    const url = URL.canParse(raw) ? new URL(raw) : null;
    if (url === null || !protocols.includes(url.protocol)) {
      throw new Error(`${env} must be a ${server} URL such as ${example}, got one ${url ? `of scheme ${url.protocol}` : 'that does not parse'}`);
    }
    const problem = pathProblem(url.pathname);
    if (problem) throw new Error(`${env}'s path ${problem}, got "${url.pathname}"`);
    return raw;
  },
});

/** A setting the service could read but a server it names refuses, found as the service starts: it refuses to start, in one line. */
export class SettingRefused extends Error {}

/**
 * A Redis URL's path is its database's number, or nothing for database 0. ioredis sent
 * `SELECT NaN` for `/abc`, and the process ended two seconds after it had started.
 */
const redisDatabasePath = (path: string) => (/^\/?(\d+)?$/.test(path) ? null : 'must be a database number (redis://host:6379/2) or nothing');

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

/** pino's levels, and `silent`. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * The operator key's length asked for (a shorter one is taken, and the start banner says so):
 * the operator API shares the partners' port, guarded by the key and the failed-authentication
 * limit alone. `openssl rand -base64 32` gives 44 characters.
 */
export const STRONG_KEY_CHARS = 32;

/** One of `values`; a misspelt level crashed the start with a stack trace, after the store was migrated. */
const oneOf = (env: string, fallback: string, values: readonly string[], meaning: string): Setting<string> => ({
  env, meaning, shown: `\`${fallback}\``,
  read(raw) {
    if (!given(raw)) return fallback;
    if (!values.includes(raw)) throw new Error(`${env} must be one of ${values.join(', ')}, got "${raw}"`);
    return raw;
  },
});

/** proxy-addr's named ranges (Fastify's trustProxy reads the list with it). */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Whether `entry` is an address, an address/prefix length, or a named range; another crashed the start after the store was migrated. */
function isTrustedRange(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

const trustedRanges = (env: string, meaning: string): Setting<string | undefined> => ({
  env, meaning, shown: 'unset',
  read(raw) {
    if (!given(raw)) return undefined;
    const bad = raw.split(',').map((entry) => entry.trim()).find((entry) => !isTrustedRange(entry));
    if (bad !== undefined) throw new Error(`${env} must list addresses or CIDR ranges such as 10.0.0.0/8, got "${bad}"`);
    return raw;
  },
});

/** `on` or `off`, also written `1` or `0`; anything else is refused (`PDS_DEMO=off` once loaded the demo data, as only `0` skipped it). */
function onOff(env: string, fallback: boolean, meaning: string): Setting<boolean> {
  return {
    env, meaning, shown: fallback ? '`on`' : '`off`',
    read(raw) {
      if (!given(raw)) return fallback;
      if (raw === 'on' || raw === '1') return true;
      if (raw === 'off' || raw === '0') return false;
      throw new Error(`${env} must be "on" or "off" (or 1 or 0), got "${raw}"`);
    },
  };
}

export const SETTINGS = {
  port: port('PORT', 8080, 'HTTP port'),
  host: text('HOST', '127.0.0.1', 'listen address'),
  // As postgres.js reads them.
  databaseUrl: serverUrl('DATABASE_URL', 'PostgreSQL 15+ server; unset means the embedded PGlite', 'PostgreSQL', ['postgres:', 'postgresql:'],
    'postgres://user:password@host:5432/database'),
  dataDir: text('PDS_DATA_DIR', './.pds-data', 'PGlite\'s data folder, locked by one process at a time (`pds.lock`)'),
  adminKey: optional('PDS_ADMIN_KEY', `enables the operator API \`/admin/v1\` with this bearer key, which should be ${STRONG_KEY_CHARS} or more random characters (a shorter one starts, with a warning)`),
  metricsKey: optional('PDS_METRICS_KEY', 'when set, `GET /metrics` needs `Authorization: Bearer` this key; unset, it is open'),
  // As ioredis reads them; another was taken, and the limits failed open for good.
  redisUrl: serverUrl('REDIS_URL', 'share rate-limit counts between instances through Redis', 'Redis', ['redis:', 'rediss:'], 'redis://host:6379', redisDatabasePath),
  trustProxy: trustedRanges('PDS_TRUST_PROXY', 'the load balancers\' addresses or CIDR ranges, comma-separated: their `X-Forwarded-For` names the source IP the limits count; unset, the TCP peer is the source'),
  readLimitPerMin: integer('PDS_READ_LIMIT_PER_MIN', 600, 'reads per minute per source IP: every request under /v1 with a valid token but a POST, PUT, PATCH or DELETE (resources, /v1/me, the change feed, a method refused 405)'),
  writeLimitPerMin: integer('PDS_WRITE_LIMIT_PER_MIN', 60, 'write requests per minute per token'),
  authFailureLimitPerMin: integer('PDS_AUTH_FAILURE_LIMIT_PER_MIN', 600, 'failed authentications (token, operator or metrics key) per minute per source IP; then 429 before any lookup'),
  demo: onOff('PDS_DEMO', true, 'a new embedded store gets demo data; `off` (or `0`) skips'),
  logLevel: oneOf('LOG_LEVEL', 'info', LOG_LEVELS, 'pino log level; logs are JSON lines on standard output, one `request completed` line per request at `info`'),
  // At most the longest wait less the grace, so that the store wait that follows from it is a time Node can wait.
  statementTimeoutMs: milliseconds('PDS_STATEMENT_TIMEOUT_MS', DEFAULT_STATEMENT_TIMEOUT_MS, 'statement time, enforced by PostgreSQL (503 `QUERY_TIMEOUT`); PGlite cannot interrupt a query',
    String(DEFAULT_STATEMENT_TIMEOUT_MS), LONGEST_MS - STATEMENT_TIMEOUT_GRACE_MS),
  plannedCounts: onOff('PDS_PLANNED_COUNTS', false, `\`on\`: \`Prefer: count=planned\`/\`estimated\` beyond ${LIMITS.rowsPerResponse.toLocaleString('en-US')} rows answer PostgreSQL's estimate, drawn from every university's rows (docs/operations.md); \`off\`: exact counts`),
  embeddedWaitMs: milliseconds('PDS_EMBEDDED_WAIT_MS', 5_000, 'PGlite only: how long a request waits for the one session before 503 `DATABASE_BUSY`'),
  dbMaxConnections: integer('PDS_DB_MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 'PostgreSQL connections per instance in each of its two pools: partner reads (reader sessions), everything else'),
  readerSessions: onOff('PDS_READER_SESSIONS', true, '`off`: partner reads set role and scope per transaction like every other statement, for a pooler that shares server sessions between clients (PgBouncer in transaction mode); `on` needs sessions of the service\'s own (docs/scaling.md)'),
  citusReadNodes: onOff('PDS_CITUS_READ_NODES', true, 'Citus only: a partner read goes to the node holding its universities\' shards (its address from `pg_dist_node`, user, password and database from `DATABASE_URL`); `off`: every statement goes through the coordinator (docs/scaling.md)'),
  dbConnectTimeoutMs: milliseconds('PDS_DB_CONNECT_TIMEOUT_MS', DEFAULT_STORE_TIMEOUTS.connectTimeoutMs, 'TCP connect, then startup and authentication, each within this'),
  dbPoolWaitMs: milliseconds('PDS_DB_POOL_WAIT_MS', DEFAULT_STORE_TIMEOUTS.poolWaitMs, 'longest wait for a free connection'),
  // The server cancels a slow statement (57014) a second before the client would give up.
  dbWaitMs: milliseconds('PDS_DB_WAIT_MS', (read) => Number(read.statementTimeoutMs) + STATEMENT_TIMEOUT_GRACE_MS,
    'longest time one transaction waits for the store\'s answers; then its connection is destroyed', `statement timeout + ${STATEMENT_TIMEOUT_GRACE_MS}`),
  readyTimeoutMs: milliseconds('PDS_READY_TIMEOUT_MS', 1_000, 'how long `/readyz` waits for the store'),
  requestTimeoutMs: milliseconds('PDS_REQUEST_TIMEOUT_MS', 30_000, 'the whole request, headers and body, must arrive within this; else 408 and the socket closes'),
  headersTimeoutMs: milliseconds('PDS_HEADERS_TIMEOUT_MS', 10_000, 'the request line and headers must arrive within this (at most the request timeout); else 408'),
  idleTimeoutMs: milliseconds('PDS_IDLE_TIMEOUT_MS', 30_000, 'a socket with no traffic either way for this long is closed; one whose request body stopped arriving is answered 408 first'),
  keepAliveTimeoutMs: milliseconds('PDS_KEEP_ALIVE_TIMEOUT_MS', 5_000, 'an idle keep-alive connection is closed after this; behind a load balancer, set it above the balancer\'s idle timeout'),
  shutdownTimeoutMs: milliseconds('PDS_SHUTDOWN_TIMEOUT_MS', 20_000,
    'on SIGTERM, how long requests in progress (a streamed page) may finish; then their connections are closed. Keep it under the orchestrator\'s grace period (Kubernetes: 30 s)'),
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
