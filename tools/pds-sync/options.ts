/**
 * What a sync is told: a JSON configuration file and command-line flags (a flag beats the file,
 * the file beats the default). Everything is checked here, before a file is read or a request sent.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { type Static, Type } from 'typebox';
import { Value } from 'typebox/value';
import { LIMITS } from '../../src/limits.ts';
import { WRITE_SHAPES, WRITABLE_RESOURCES, type WritableResource, fieldNames } from '../../src/resources/write-shapes.ts';
import { WRITE_MODES, type WriteMode } from '../../src/writes/batch.ts';
import { createFieldsRequired } from '../../src/writes/field-checks.ts';
import type { RetryPolicy } from './client.ts';
import type { ColumnMapping } from './csv-input.ts';
import { SyncInputError } from './errors.ts';

const MODES = WRITE_MODES;

/** The environment variable the token is read from when no --token-file is given. */
const TOKEN_ENV = 'PDS_TOKEN';

const DEFAULTS = {
  mode: 'put' as WriteMode,
  batchSize: LIMITS.batchRows,
  maxAttempts: 6,
  retryBaseMs: 1_000,
  timeoutMs: 120_000,
  rejectReport: 'pds-sync-rejects.csv',
} as const;

/** No back-off wait is longer, unless the service's Retry-After asks for more. */
const MAX_RETRY_DELAY_MS = 60_000;

/** The bounds of the numbers a flag or the configuration file may give: one set for both. */
const BOUNDS = {
  maxAttempts: { minimum: 1, maximum: 100 },
  retryBaseMs: { minimum: 1, maximum: MAX_RETRY_DELAY_MS },
  // Node's timers take at most 2^31 − 1 ms; a longer one fires at once.
  timeoutMs: { minimum: 1, maximum: 3_600_000 },
} as const;

export interface SyncPlan {
  readonly baseUrl: URL;
  readonly token: string;
  readonly mode: WriteMode;
  readonly dryRun: boolean;
  readonly batchSize: number;
  readonly retry: RetryPolicy;
  readonly emptyAsNull: boolean;
  readonly rejectReport: string;
  /**
   * Part of every batch's Idempotency-Key: a retry within the run repeats its key and gets the
   * first answer back; a new run writes afresh (PUT answers `unchanged` for what is already there)
   * unless it is given the stopped run's id to continue it under the same keys.
   */
  readonly runId: string;
  /** The file and column mapping of each resource to sync. */
  readonly inputs: ReadonlyMap<WritableResource, { path: string; mapping: ColumnMapping }>;
}

const mappingSchema = (resource: WritableResource) => Type.Object(
  Object.fromEntries(fieldNames(WRITE_SHAPES[resource]).map((field) => [field, Type.Optional(Type.String({ minLength: 1 }))])),
  { additionalProperties: false },
);
const inputSchema = (resource: WritableResource) => Type.Object({
  file: Type.Optional(Type.String({ minLength: 1 })),
  columns: Type.Optional(mappingSchema(resource)),
}, { additionalProperties: false });

/** A file and mapping per writable resource: a new one must be given its place here. */
const INPUT_SCHEMAS = {
  students: Type.Optional(inputSchema('students')),
  cohorts: Type.Optional(inputSchema('cohorts')),
} satisfies Record<WritableResource, unknown>;

/** The configuration file's shape; paths in it are relative to the file's folder. The token never goes in it. */
const CONFIG_SCHEMA = Type.Object({
  url: Type.Optional(Type.String({ minLength: 1 })),
  tokenFile: Type.Optional(Type.String({ minLength: 1 })),
  mode: Type.Optional(Type.Union(MODES.map((mode) => Type.Literal(mode)))),
  batchSize: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.batchRows })),
  maxAttempts: Type.Optional(Type.Integer(BOUNDS.maxAttempts)),
  retryBaseMs: Type.Optional(Type.Integer(BOUNDS.retryBaseMs)),
  timeoutMs: Type.Optional(Type.Integer(BOUNDS.timeoutMs)),
  emptyAsNull: Type.Optional(Type.Boolean()),
  rejectReport: Type.Optional(Type.String({ minLength: 1 })),
  ...INPUT_SCHEMAS,
}, { additionalProperties: false });

type ConfigFile = Static<typeof CONFIG_SCHEMA>;

/** The flags as commander parsed them; absent means not given. */
export interface Flags {
  config?: string;
  cohorts?: string;
  students?: string;
  map?: Mapping[];
  url?: string;
  tokenFile?: string;
  mode?: WriteMode;
  batchSize?: number;
  dryRun?: boolean;
  maxAttempts?: number;
  retryBaseMs?: number;
  timeoutMs?: number;
  emptyAsNull?: boolean;
  rejectReport?: string;
  runId?: string;
}

interface Mapping {
  readonly resource: WritableResource;
  readonly field: string;
  readonly column: string;
}

const integerIn = (min: number, max: number) => (value: string): number => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('Not a whole number.');
  const n = Number(value);
  if (n < min || n > max) throw new InvalidArgumentError(`Must be from ${min} to ${max}.`);
  return n;
};

/** A run id fits in an Idempotency-Key beside the batch's hash. */
function parseRunId(value: string): string {
  if (!/^[A-Za-z0-9-]{1,64}$/.test(value)) throw new InvalidArgumentError('Expected 1 to 64 letters, digits or hyphens.');
  return value;
}

/** `--map students.email="Email Address"`, repeatable. */
function parseMapping(value: string, previous: Mapping[] = []): Mapping[] {
  const match = /^([a-z_]+)\.([a-z_]+)=(.+)$/.exec(value);
  if (!match) throw new InvalidArgumentError('Expected <resource>.<field>=<column>, e.g. students.email=Email.');
  const [, resource, field, column] = match;
  if (!(WRITABLE_RESOURCES as string[]).includes(resource)) {
    throw new InvalidArgumentError(`"${resource}" is not a resource pds-sync writes (${WRITABLE_RESOURCES.join(', ')}).`);
  }
  const fields: string[] = fieldNames(WRITE_SHAPES[resource as WritableResource]);
  if (!fields.includes(field)) throw new InvalidArgumentError(`${resource} has no field "${field}" (${fields.join(', ')}).`);
  return [...previous, { resource: resource as WritableResource, field, column }];
}

export function declareOptions(program: Command): Command {
  return program
    .option('-c, --config <file>', 'JSON configuration file (files, column mappings, settings); flags override it')
    .option('--cohorts <csv>', 'CSV file of cohorts, sent first')
    .option('--students <csv>', 'CSV file of students, sent after the cohorts')
    .option('--map <resource.field=column>', 'the CSV column that feeds a field, e.g. students.email="Email Address" (repeatable); '
      + 'an unmapped field is fed by a column of its own name', parseMapping)
    .option('--url <base>', 'base URL of the service, e.g. https://pds.example.edu')
    .option('--token-file <file>', `file holding the write token (otherwise the ${TOKEN_ENV} environment variable)`)
    .addOption(new Option('--mode <mode>', `write mode (default: ${DEFAULTS.mode})`).choices(MODES))
    .option('--batch-size <rows>', `rows per request, at most ${LIMITS.batchRows} (default: ${DEFAULTS.batchSize})`, integerIn(1, LIMITS.batchRows))
    .option('--dry-run', 'send every batch with Prefer: tx=rollback: the service answers what it would do and writes nothing')
    .option('--max-attempts <n>', `attempts per batch on 429, 5xx or no answer, and per row answered CONCURRENT_WRITE (default: ${DEFAULTS.maxAttempts})`, integerIn(BOUNDS.maxAttempts.minimum, BOUNDS.maxAttempts.maximum))
    .option('--retry-base-ms <ms>', `first back-off wait; it doubles per retry, with jitter (default: ${DEFAULTS.retryBaseMs})`, integerIn(BOUNDS.retryBaseMs.minimum, BOUNDS.retryBaseMs.maximum))
    .option('--timeout-ms <ms>', `how long one request may take before it is retried (default: ${DEFAULTS.timeoutMs})`, integerIn(BOUNDS.timeoutMs.minimum, BOUNDS.timeoutMs.maximum))
    .option('--empty-as-null', 'send an empty cell of a field that takes null as null (clearing it); otherwise empty cells are left out')
    .option('--reject-report <file>', `CSV of the rejected rows, written on every run (default: ${DEFAULTS.rejectReport})`)
    .option('--run-id <id>', 'continue a stopped run under the same Idempotency-Keys (its id is printed as it starts, and again if it stops); default: a new id', parseRunId);
}

async function readConfig(path: string): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new SyncInputError(`${path}: cannot read the configuration file (${(error as NodeJS.ErrnoException).code ?? String(error)}).`);
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new SyncInputError(`${path}: not JSON (${(error as Error).message}).`);
  }
  // An unknown key is reported twice: by its parent (which names it) and as a key whose schema is false.
  const [first] = Value.Errors(CONFIG_SCHEMA, config).filter((e) => e.keyword !== 'boolean');
  if (first) {
    const where = first.instancePath || '(top level)';
    const extra = first.keyword === 'additionalProperties' ? `: ${(first.params as { additionalProperties: string[] }).additionalProperties.join(', ')}` : '';
    throw new SyncInputError(`${path}: ${where} ${first.message}${extra}.`);
  }
  return config as ConfigFile;
}

async function readToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv): Promise<string> {
  if (tokenFile === undefined) {
    const token = env[TOKEN_ENV]?.trim();
    if (!token) throw new SyncInputError(`no token: set ${TOKEN_ENV} or pass --token-file <file>.`);
    return token;
  }
  let token: string;
  try {
    token = (await readFile(tokenFile, 'utf8')).trim();
  } catch (error) {
    throw new SyncInputError(`${tokenFile}: cannot read the token file (${(error as NodeJS.ErrnoException).code ?? String(error)}).`);
  }
  if (!token) throw new SyncInputError(`${tokenFile}: the token file is empty.`);
  return token;
}

function parseBaseUrl(url: string | undefined): URL {
  if (url === undefined) throw new SyncInputError('no service URL: pass --url <base> or set "url" in the configuration file.');
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new SyncInputError(`"${url}" is not a URL.`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new SyncInputError(`"${url}" is not an http or https URL.`);
  // The paths are added under the base: /v1 is part of them, so a base given with it drops it.
  base.pathname = `${base.pathname.replace(/\/v1\/?$/, '').replace(/\/$/, '')}/`;
  return base;
}

export async function resolvePlan(flags: Flags, env: NodeJS.ProcessEnv): Promise<SyncPlan> {
  const config = flags.config ? await readConfig(flags.config) : {};
  const fromConfig = (path: string | undefined) => (path !== undefined && flags.config ? resolve(dirname(flags.config), path) : path);
  const inputs = new Map<WritableResource, { path: string; mapping: ColumnMapping }>();
  for (const resource of WRITABLE_RESOURCES) {
    const path = flags[resource] ?? fromConfig(config[resource]?.file);
    const flagged = (flags.map ?? []).filter((m) => m.resource === resource);
    if (path === undefined) {
      if (flagged.length > 0) throw new SyncInputError(`--map ${resource}.${flagged[0].field}=… was given, but no ${resource} file (--${resource} <csv>).`);
      continue;
    }
    const mapping = { ...config[resource]?.columns, ...Object.fromEntries(flagged.map((m) => [m.field, m.column])) };
    inputs.set(resource, { path, mapping });
  }
  if (inputs.size === 0) throw new SyncInputError('nothing to sync: give --cohorts <csv> and/or --students <csv> (or "file" in the configuration).');
  return {
    baseUrl: parseBaseUrl(flags.url ?? config.url),
    token: await readToken(flags.tokenFile ?? fromConfig(config.tokenFile), env),
    mode: flags.mode ?? config.mode ?? DEFAULTS.mode,
    dryRun: flags.dryRun ?? false,
    batchSize: flags.batchSize ?? config.batchSize ?? DEFAULTS.batchSize,
    retry: {
      maxAttempts: flags.maxAttempts ?? config.maxAttempts ?? DEFAULTS.maxAttempts,
      baseDelayMs: flags.retryBaseMs ?? config.retryBaseMs ?? DEFAULTS.retryBaseMs,
      maxDelayMs: MAX_RETRY_DELAY_MS,
      timeoutMs: flags.timeoutMs ?? config.timeoutMs ?? DEFAULTS.timeoutMs,
    },
    emptyAsNull: flags.emptyAsNull ?? config.emptyAsNull ?? false,
    rejectReport: flags.rejectReport ?? fromConfig(config.rejectReport) ?? DEFAULTS.rejectReport,
    runId: flags.runId ?? randomUUID(),
    inputs,
  };
}

/** The fields a row must have a column for in this mode: the key, and where every row must carry them, the create fields. */
export function neededFields(resource: WritableResource, mode: WriteMode): string[] {
  const shape = WRITE_SHAPES[resource];
  if (!createFieldsRequired(shape, mode)) return [shape.key];
  return Object.entries(shape.fields).filter(([, field]) => field.requiredOnCreate).map(([name]) => name);
}
