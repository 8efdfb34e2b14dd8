/**
 * One batch write over HTTP, retried while a retry can help: on 429, on 5xx, on 409
 * IDEMPOTENCY_KEY_IN_USE and when the request never got an answer (connection refused or reset,
 * timeout). The wait is exponential with jitter,
 * and never shorter than the Retry-After the service sent; 409s are retried for as long as the
 * key's lease may run, whatever the attempts. Each batch carries an Idempotency-Key
 * made of the run's id and what is sent, so a retry repeats it and a new run does not.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { LIMITS } from '../../src/limits.ts';
import type { WritableResource } from '../../src/resources/write-shapes.ts';
import type { WriteMode } from '../../src/writes/batch.ts';
import { SyncRequestError } from './errors.ts';

export interface RetryPolicy {
  /** Attempts per batch, the first included. */
  readonly maxAttempts: number;
  /** The first retry waits about this long; each further one about twice as long as the one before. */
  readonly baseDelayMs: number;
  /** No wait is longer than this, except one the service asked for with Retry-After. */
  readonly maxDelayMs: number;
  /** One attempt may take this long before it is abandoned and counted as unanswered. */
  readonly timeoutMs: number;
}

export interface BatchRequest {
  readonly baseUrl: URL;
  readonly token: string;
  readonly resource: WritableResource;
  readonly mode: WriteMode;
  readonly rows: readonly unknown[];
  readonly dryRun: boolean;
  readonly runId: string;
  /** The batch's number in its file, from 1; for a resend of its raced rows, `<number>.<resend>`. */
  readonly batch: string;
}

export interface RowResult {
  readonly status: 'created' | 'updated' | 'unchanged' | 'rejected';
  readonly code?: string;
  readonly message?: string;
  readonly notes?: readonly string[];
}

export interface BatchResponse {
  readonly counts: Record<RowResult['status'], number>;
  readonly results: readonly RowResult[];
  readonly dropped_fields: readonly string[];
  /** Not in the body: the answer was kept from an earlier run (Idempotent-Replayed), nothing written now. */
  readonly replayed?: boolean;
}

/** What a retry is about to do, for the progress output. */
export interface RetryNotice {
  readonly attempt: number;
  /** Exceeded by `attempt` while the batch's key is still held (IDEMPOTENCY_KEY_IN_USE): those retries wait for its lease. */
  readonly maxAttempts: number;
  readonly reason: string;
  readonly delayMs: number;
}

const METHODS: Record<WriteMode, string> = { put: 'PUT', post: 'POST', patch: 'PATCH' };

/** The preference a dry run sends: strict, so that a service that cannot honour it refuses instead of writing. */
const DRY_RUN_PREFERENCE = 'tx=rollback, handling=strict';

/**
 * The key a batch is sent with: within a run, the same batch (its number in its file), method,
 * resource, preference and rows always give the same key. The number tells apart two batches of
 * the same rows (a row repeated in an export sent one a batch): under one key the second got the
 * first's answer, and the repeat was never reported.
 */
export function idempotencyKey(runId: string, batch: string, method: string, path: string, prefer: string | null, body: string): string {
  return `pds-sync-${runId}-${createHash('sha256').update(`${batch}\n${method} ${path}\n${prefer ?? ''}\n${body}`).digest('hex')}`;
}

/** Retry-After as seconds or an HTTP date, in milliseconds from now; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null) return null;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * The wait before retry number `retry` (1 for the first): half of the exponential step plus a
 * random share of the other half, so clients that failed together do not retry together; at
 * least what Retry-After asked for, plus a little jitter so they do not all return at once.
 */
export function backoffMs(retry: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>, retryAfter: number | null, random = Math.random): number {
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  const backoff = step / 2 + random() * (step / 2);
  if (retryAfter === null) return Math.round(backoff);
  return Math.round(retryAfter + random() * Math.min(policy.baseDelayMs, retryAfter / 10 + 100));
}

/**
 * A refusal a retry can help: 429, 5xx, and 409 IDEMPOTENCY_KEY_IN_USE, the same batch sent
 * before (an attempt that timed out) still running: the retry gets its answer.
 */
export const isRetryable = (status: number, code: string | undefined) =>
  status === 429 || status >= 500 || (status === 409 && code === 'IDEMPOTENCY_KEY_IN_USE');

/** The service's error body: its code and, as one line, `status code: message`. */
async function readRefusal(response: Response): Promise<{ code: string | undefined; description: string }> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    if (body.code || body.message) return { code: body.code, description: `${response.status} ${body.code ?? ''}: ${body.message ?? ''}`.trim() };
  } catch {
    // Not the service's JSON error body (a proxy's page, say): its status is what there is to say.
  }
  return { code: undefined, description: `${response.status} ${response.statusText}` };
}

export async function sendBatch(request: BatchRequest, policy: RetryPolicy, onRetry: (notice: RetryNotice) => void): Promise<BatchResponse> {
  const url = new URL(`v1/${request.resource}`, request.baseUrl);
  const method = METHODS[request.mode];
  const body = JSON.stringify({ [request.resource]: request.rows });
  const prefer = request.dryRun ? DRY_RUN_PREFERENCE : null;
  const headers: Record<string, string> = {
    authorization: `Bearer ${request.token}`,
    'content-type': 'application/json',
    'idempotency-key': idempotencyKey(request.runId, request.batch, method, url.pathname, prefer, body),
    'user-agent': 'pds-sync',
    ...(prefer ? { prefer } : {}),
  };
  let inUseSince: number | null = null;
  let heldPolls = 0;
  /** Attempts refused or unanswered, those refused because the key was held within its lease aside. */
  let failures = 0;
  for (let attempt = 1; ; attempt++) {
    let reason: string;
    let retryAfter: number | null = null;
    let keyInUse = false;
    try {
      const response = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(policy.timeoutMs) });
      if (response.ok) {
        if (request.dryRun && !/\btx=rollback\b/.test(response.headers.get('preference-applied') ?? '')) {
          throw new SyncRequestError(`${method} ${url.pathname}: the service did not confirm the dry run (no Preference-Applied: tx=rollback); stopping.`);
        }
        const answer = (await response.json()) as BatchResponse;
        return { ...answer, replayed: response.headers.get('idempotent-replayed') === 'true' };
      }
      const refusal = await readRefusal(response);
      if (!isRetryable(response.status, refusal.code)) {
        throw new SyncRequestError(`${method} ${url.pathname} was refused: ${refusal.description}`);
      }
      reason = refusal.description;
      retryAfter = retryAfterMs(response.headers.get('retry-after'));
      keyInUse = refusal.code === 'IDEMPOTENCY_KEY_IN_USE';
    } catch (error) {
      if (error instanceof SyncRequestError) throw error;
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      reason = (error as Error).name === 'TimeoutError' ? `no answer within ${policy.timeoutMs} ms` : `no answer (${cause ?? (error as Error).message})`;
    }
    // A key in use is held by this batch sent before, by a process (or service) that may have
    // died: the service frees it when its lease ends, so the batch is retried until then, whatever
    // the attempts, through the other refusals on the way (a restart's 503, a 429): only an
    // answer ends the wait. Cleared by a 429, the wait ended the run at the next refusal.
    if (keyInUse) inUseSince ??= Date.now();
    const leaseLeftMs = inUseSince === null ? 0 : inUseSince + LIMITS.idempotencyLeaseSeconds * 1000 - Date.now();
    if (!keyInUse || leaseLeftMs <= 0) failures++;
    if (failures >= policy.maxAttempts && leaseLeftMs <= 0) {
      throw new SyncRequestError(`${method} ${url.pathname} failed after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${reason}`);
    }
    // A held key is asked again after a back-off of its own, at least its Retry-After (1 s), at
    // most until just after the lease ends: every ask counts against the token's write limit, and
    // once a second through a 60 s lease took the default limit's 60 writes a minute.
    const delayMs = keyInUse
      ? Math.max(retryAfter ?? 0, Math.min(backoffMs(++heldPolls, policy, null), Math.max(0, leaseLeftMs) + policy.baseDelayMs))
      : backoffMs(Math.min(failures, policy.maxAttempts), policy, retryAfter);
    onRetry({ attempt: attempt + 1, maxAttempts: policy.maxAttempts, reason, delayMs });
    await sleep(delayMs);
  }
}
