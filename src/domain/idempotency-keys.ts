/**
 * Idempotency keys on writes, with Stripe's semantics (docs/api.md, "Idempotency keys"): the first
 * request with a key claims it in a short transaction of its own, so that a repeat sees it running
 * before the batch commits; the batch's transaction then stores the answer beside its writes
 * (`completeKey`), so one is never kept without the other. A repeat of the same request gets the
 * stored answer; the same key with another request is refused; a failed write releases its claim.
 * Keys are scoped to the token and its university and kept for a day (LIMITS.idempotencyKeySeconds).
 *
 * Every statement names the university (one shard on Citus) and takes its timestamps as
 * parameters, computed here: no statement applies now() to a row.
 */
import { createHash, randomUUID } from 'node:crypto';
import stringify from 'safe-stable-stringify';
import type { Database } from '../db/database.ts';
import type { Queryable } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';

/** Who sent a key and which request it names. */
export interface KeyedRequest {
  readonly universityId: string;
  readonly tokenId: string;
  readonly key: string;
  readonly requestHash: string;
}

/** The answer kept for a key: what a repeat is answered with. */
export interface StoredAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export type KeyClaim =
  | { readonly kind: 'claimed'; readonly claimId: string }
  | { readonly kind: 'replay'; readonly answer: StoredAnswer };

/** What a key's characters may be: printable ASCII, space included (a regular expression's class, also the OpenAPI description's). */
export const IDEMPOTENCY_KEY_CHARACTER = '[\\x20-\\x7E]';
const KEY_PATTERN = new RegExp(`^${IDEMPOTENCY_KEY_CHARACTER}{1,${LIMITS.idempotencyKeyChars}}$`);

/** The Idempotency-Key header's key, null when absent; 400 INVALID_IDEMPOTENCY_KEY when malformed. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !KEY_PATTERN.test(header)) throw apiError('INVALID_IDEMPOTENCY_KEY');
  return header;
}

/**
 * A number JSON cannot hold (a sent 1e309 parses as Infinity) as a value of its own: JSON text
 * writes it null, and the request that cleared a phone with null was taken for the one that sent
 * 1e309, which is refused.
 */
const keepNonFinite = (_key: string, value: unknown) =>
  (typeof value === 'number' && !Number.isFinite(value) ? { 'non-finite number': String(value) } : value);

/**
 * The request a key stands for: method, resource, Prefer as sent and the body as canonical JSON
 * (keys sorted, no white space), so that the same rows sent with other spacing or key order are
 * the same request. SHA-256 in hex.
 */
export function requestHash(request: { method: string; resource: string; prefer: string | string[] | undefined; body: unknown }): string {
  const prefer = typeof request.prefer === 'string' ? request.prefer : request.prefer?.join(', ') ?? null;
  return createHash('sha256').update(stringify([request.method, request.resource, prefer, request.body], keepNonFinite)!).digest('hex');
}

const seconds = (at: Date, count: number) => new Date(at.getTime() + count * 1000).toISOString();

const KEY_COLUMNS = 'university_id = $1 and token_id = $2 and key = $3';
const keyParams = (request: KeyedRequest) => [request.universityId, request.tokenId, request.key];

interface KeyRow {
  request_hash: string;
  response_status: number | null;
  response_headers: string | null;
  response_body: string | null;
  lease_expired: boolean;
}

/**
 * Claims the key for this request, in a transaction of its own that commits before the write
 * begins; or answers the stored answer of the same request. 422 IDEMPOTENCY_KEY_REUSED when the
 * key named another request, 409 IDEMPOTENCY_KEY_IN_USE while another holds its lease. A key past
 * its day is deleted first, so it is free again; a lease past its end is taken over.
 */
export function claimKey(db: Database, request: KeyedRequest, now: Date): Promise<KeyClaim> {
  const claimId = randomUUID();
  const leaseEnd = seconds(now, LIMITS.idempotencyLeaseSeconds);
  return db.asUniversity(request.universityId, async (tx) => {
    await tx.query(`delete from idempotency_keys where ${KEY_COLUMNS} and created_at <= $4::timestamptz`,
      [...keyParams(request), seconds(now, -LIMITS.idempotencyKeySeconds)]);
    // The claim that stopped this insert can be gone by the next statement: its write failed and
    // freed it (releaseKey), or an erasure dropped its answer. The key is free then; one more
    // insert takes it, and a key freed again as fast is answered as held.
    for (let attempt = 1; ; attempt++) {
      const inserted = await tx.query(
        `insert into idempotency_keys (university_id, token_id, key, request_hash, claim_id, lease_expires_at, created_at)
         values ($1::uuid, $2::uuid, $3, $4, $5::uuid, $6::timestamptz, $7::timestamptz)
         on conflict (university_id, token_id, key) do nothing returning claim_id`,
        [...keyParams(request), request.requestHash, claimId, leaseEnd, now.toISOString()]);
      if (inserted.length > 0) return { kind: 'claimed', claimId };
      const [held] = await tx.query<KeyRow>(
        `select request_hash, response_status, response_headers::text as response_headers, response_body,
                lease_expires_at <= $4::timestamptz as lease_expired
         from idempotency_keys where ${KEY_COLUMNS}`,
        [...keyParams(request), now.toISOString()]);
      if (held === undefined) {
        if (attempt < CLAIM_ATTEMPTS) continue;
        throw apiError('IDEMPOTENCY_KEY_IN_USE');
      }
      return answerHeld(tx, request, held, claimId, leaseEnd, now);
    }
  });
}

/** How many times claimKey inserts its claim when the claim in its way is gone before it is read. */
const CLAIM_ATTEMPTS = 2;

/** What a claim met in its way answers: the stored answer, 422, 409, or the key taken over from a lease past its end. */
async function answerHeld(tx: Queryable, request: KeyedRequest, held: KeyRow, claimId: string, leaseEnd: string, now: Date): Promise<KeyClaim> {
  if (held.request_hash !== request.requestHash) throw apiError('IDEMPOTENCY_KEY_REUSED');
  if (held.response_status !== null) {
    return {
      kind: 'replay',
      answer: { status: held.response_status, headers: JSON.parse(held.response_headers!) as Record<string, string>, body: held.response_body! },
    };
  }
  if (!held.lease_expired) throw apiError('IDEMPOTENCY_KEY_IN_USE');
  // The holder's lease ran out: its process died, or it will find its claim gone and roll back.
  const taken = await tx.query(
    `update idempotency_keys set claim_id = $4::uuid, lease_expires_at = $5::timestamptz
     where ${KEY_COLUMNS} and response_status is null and lease_expires_at <= $6::timestamptz returning claim_id`,
    [...keyParams(request), claimId, leaseEnd, now.toISOString()]);
  if (taken.length === 0) throw apiError('IDEMPOTENCY_KEY_IN_USE');
  return { kind: 'claimed', claimId };
}

/**
 * Stores the answer in the write's own transaction. A claim that was taken over (the write outlived
 * its lease) is 409 IDEMPOTENCY_KEY_IN_USE, which rolls the write back: the one that took the key
 * over writes the batch instead.
 */
export async function completeKey(tx: Queryable, request: KeyedRequest, claimId: string, answer: StoredAnswer): Promise<void> {
  const stored = await tx.query(
    `update idempotency_keys set response_status = $5::integer, response_headers = $6::jsonb, response_body = $7
     where ${KEY_COLUMNS} and claim_id = $4::uuid and response_status is null returning claim_id`,
    [...keyParams(request), claimId, String(answer.status), JSON.stringify(answer.headers), answer.body]);
  if (stored.length === 0) throw apiError('IDEMPOTENCY_KEY_IN_USE');
}

/** Frees the key after a write that failed (and so wrote nothing), so that a retry runs it again. */
async function releaseKey(db: Database, request: KeyedRequest, claimId: string): Promise<void> {
  await db.asUniversity(request.universityId, (tx) => tx.query(
    `delete from idempotency_keys where ${KEY_COLUMNS} and claim_id = $4::uuid and response_status is null`,
    [...keyParams(request), claimId]));
}

/**
 * The waits before each further try of a release that failed: the fault of the store that failed
 * the write often fails its release too (the dropped connections of a restarting server), and
 * without another try every retry was 409 IDEMPOTENCY_KEY_IN_USE for the whole lease (60 s).
 * They end well within the lease, which frees the key in any case.
 */
const RELEASE_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000];

/**
 * releaseKey; when it fails, tried again after each of RELEASE_RETRY_DELAYS_MS while it fails, off
 * the request that failed: its answer does not wait for them, and their timers keep no process
 * alive. `gaveUp` hears of the last failure.
 */
export async function releaseKeyPersistently(db: Database, request: KeyedRequest, claimId: string, gaveUp: (error: unknown) => void): Promise<void> {
  try {
    await releaseKey(db, request, claimId);
  } catch {
    void retryRelease(db, request, claimId, gaveUp);
  }
}

async function retryRelease(db: Database, request: KeyedRequest, claimId: string, gaveUp: (error: unknown) => void): Promise<void> {
  for (const [i, delay] of RELEASE_RETRY_DELAYS_MS.entries()) {
    await new Promise((resolve) => setTimeout(resolve, delay).unref());
    try {
      return await releaseKey(db, request, claimId);
    } catch (error) {
      if (i === RELEASE_RETRY_DELAYS_MS.length - 1) gaveUp(error);
    }
  }
}

/** How often each instance deletes expired keys: a key and its answer outlive their day by at most this. */
export const PURGE_INTERVAL_MS = 10 * 60_000;

/** Deletes the keys of every university past their day. */
export async function purgeExpiredKeys(db: Database, now: Date): Promise<void> {
  await db.asOperator((tx) => tx.query('delete from idempotency_keys where created_at <= $1::timestamptz', [seconds(now, -LIMITS.idempotencyKeySeconds)]));
}
