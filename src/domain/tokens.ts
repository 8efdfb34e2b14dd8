/**
 * Bearer tokens: opaque random strings with a recognisable prefix, stored only as SHA-256
 * hashes, revocable and optionally expiring (docs/decisions.md, "Tokens and limits").
 */
import { hash as cryptoHash, randomBytes } from 'node:crypto';
import type { Database, Scope } from '../db/database.ts';
import type { Queryable } from '../db/store.ts';
import { apiError } from '../errors.ts';
import { OPERATOR_RECORDS, type OperatorRecord, getRecord } from './operator-records.ts';

const TOKEN_PREFIX = 'pds_';

export interface Principal extends Scope {
  readonly tokenId: string;
  /** Set for a single-university token, null for a consortium token. */
  readonly universityId: string | null;
  readonly consortiumId: string | null;
  readonly canWrite: boolean;
}

/** Every partner request hashes its token: the one-shot hash() took 0.35 µs where a Hash object took 1.0 µs. */
function hashToken(token: string): string {
  return cryptoHash('sha256', token, 'hex');
}

/** A token as the operator API shows it: never the secret nor its hash. */
export type TokenRecord = OperatorRecord<'tokens'>;

/** A token just issued: the record, and the secret, shown this once. */
export type IssuedToken = TokenRecord & { token: string };

export interface TokenGrant {
  universityId?: string | null;
  consortiumId?: string | null;
  canWrite?: boolean;
  expiresAt?: string | null;
  label?: string | null;
}

export async function issueToken(tx: Queryable, grant: TokenGrant): Promise<IssuedToken> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  // Read back rather than returned: Citus refuses subqueries and functions of a column in RETURNING.
  const [{ id }] = await tx.query<{ id: string }>(
    `insert into tokens (token_hash, university_id, consortium_id, can_write, expires_at, label)
     values ($1, $2, $3, $4, $5, $6) returning id`,
    [hashToken(token), grant.universityId ?? null, grant.consortiumId ?? null, String(grant.canWrite ?? false), grant.expiresAt ?? null, grant.label ?? null],
  );
  const row = (await getRecord(tx, 'tokens', id))!;
  return { ...row, token };
}

export async function revokeToken(tx: Queryable, id: string): Promise<boolean> {
  const revoked = await tx.query('update tokens set revoked_at = now() where id = $1 and revoked_at is null returning id', [id]);
  // Revoking a revoked token again changes nothing and succeeds: a retried DELETE is not 404.
  // (One statement with coalesce(revoked_at, now()) is one Citus refuses: docs/scaling.md.)
  return revoked.length > 0 || (await tx.query('select from tokens where id = $1', [id])).length > 0;
}

/**
 * Replaces an active token: a new one with the same scope, can_write and label (and the given
 * expiry, if any), while the old one stays valid for `graceSeconds` more, never longer than it
 * already would. Null when no token has the id; a revoked or expired one is TOKEN_NOT_ACTIVE.
 */
export async function rotateToken(tx: Queryable, id: string, options: { graceSeconds: number; expiresAt?: string | null }): Promise<IssuedToken | null> {
  const [old] = await tx.query<{ university_id: string | null; consortium_id: string | null; can_write: boolean; label: string | null; state: 'active' | 'revoked' | 'expired' }>(
    `select university_id, consortium_id, can_write, label,
            case when revoked_at is not null then 'revoked' when expires_at <= now() then 'expired' else 'active' end as state
     from tokens where id = $1 for update`,
    [id],
  );
  if (!old) return null;
  if (old.state !== 'active') throw apiError('TOKEN_NOT_ACTIVE', old.state);
  // least() passes over a null expiry: a token that never expired now expires after the grace.
  await tx.query(`update tokens set expires_at = least(expires_at, now() + make_interval(secs => $2::integer)) where id = $1`,
    [id, String(options.graceSeconds)]);
  return issueToken(tx, {
    universityId: old.university_id, consortiumId: old.consortium_id, canWrite: old.can_write, label: old.label, expiresAt: options.expiresAt,
  });
}

/** What a partner learns of its own token (GET /v1/me): the scope with every university it covers. */
export interface TokenDescription {
  id: string;
  label: string | null;
  scope: { kind: 'university' | 'consortium'; id: string; name: string; universities: { id: string; name: string }[] };
  can_write: boolean;
  created_at: string;
  expires_at: string | null;
}

/** The token with that id, which exists: tokens are revoked, never deleted. */
export async function describeToken(tx: Queryable, id: string): Promise<TokenDescription> {
  const fields = OPERATOR_RECORDS.tokens.fields;
  const [row] = await tx.query<TokenDescription>(
    `select ${fields.id} as id, ${fields.label} as label, ${fields.can_write} as can_write,
            ${fields.created_at} as created_at, ${fields.expires_at} as expires_at,
            ${fields.scope}::jsonb || jsonb_build_object('universities', (
              select coalesce(jsonb_agg(jsonb_build_object('id', u.id, 'name', u.name) order by u.name, u.id), '[]')
              from universities u where u.id = r.university_id or u.consortium_id = r.consortium_id)) as scope
     from tokens r where r.id = $1`,
    [id],
  );
  return row;
}

interface CachedPrincipal {
  readonly principal: Principal;
  readonly expiresAtMs: number | null;
  readonly cachedUntilMs: number;
}

/** Where the authenticator reports a failure that does not fail the request. */
export interface TokenUsageLog {
  warn(details: Record<string, unknown>, message: string): void;
}

export interface TokenAuthenticatorOptions {
  log?: TokenUsageLog;
  /** Milliseconds since the epoch; tests move it. */
  now?: () => number;
}

/**
 * Resolves a bearer token to its principal. Lookups are cached briefly because every request
 * needs one; a revocation, a rotation or a consortium's new member through this instance takes
 * effect at once, one through another instance within CACHE_MS. A cached token is still refused
 * from its expiry on. Unknown hashes are remembered as long, so a repeated bad token costs one
 * lookup, not one per request.
 *
 * Tokens are looked up and their use recorded as the operator: the partner role cannot read
 * the tokens table at all.
 */
export class TokenAuthenticator {
  static readonly CACHE_MS = 5_000;
  /** Bounds the memory random tokens can take; the oldest unknown hash is forgotten first. */
  static readonly MAX_UNKNOWN_HASHES = 10_000;
  /** A token's last_used_at is written at most once per this, per instance and across instances. */
  static readonly USAGE_INTERVAL_MS = 60_000;
  /** Past this many tokens noted as used, the notes older than the interval are dropped. */
  static readonly MAX_USAGE_NOTES = 10_000;
  private readonly cache = new Map<string, CachedPrincipal>();
  /** Lookups under way, by hash (loadOnce). */
  private readonly loading = new Map<string, Promise<CachedPrincipal | null>>();
  /**
   * Counts the forgets: a lookup that began before one may have read what it changed, and is not
   * cached. Cached when it ended, it outlived a revocation by CACHE_MS (3 of 80 revocations
   * made while their token's reads were in flight).
   */
  private forgets = 0;
  /** Hash → until when it is known to match no active token. */
  private readonly unknown = new Map<string, number>();
  /** Token id → when this instance last wrote its last_used_at. */
  private readonly usageWrittenAt = new Map<string, number>();
  private readonly usageWrites = new Set<Promise<void>>();
  private readonly now: () => number;
  private readonly log: TokenUsageLog | undefined;

  constructor(private readonly db: Database, options: TokenAuthenticatorOptions = {}) {
    this.now = options.now ?? Date.now;
    this.log = options.log;
  }

  /**
   * The token's principal, or null. `admit` is awaited first (it may refuse by throwing), with
   * the token's hash when it is to be looked up in the store, else null: the answer comes from
   * memory (a cached or known-unknown hash, or no token prefix).
   */
  async authenticate(token: string, admit: (lookup: string | null) => Promise<void> = async () => {}): Promise<Principal | null> {
    if (!token.startsWith(TOKEN_PREFIX)) {
      await admit(null);
      return null;
    }
    const hash = hashToken(token);
    const now = this.now();
    let entry = this.cache.get(hash) ?? null;
    const knownUnknown = (this.unknown.get(hash) ?? 0) >= now;
    await admit((!entry || entry.cachedUntilMs < now) && !knownUnknown ? hash : null);
    if (!entry || entry.cachedUntilMs < now) {
      if (knownUnknown) return null;
      const forgetsBefore = this.forgets;
      entry = await this.loadOnce(hash, now);
      const current = forgetsBefore === this.forgets;
      if (!entry) {
        if (current) {
          this.cache.delete(hash);
          this.rememberUnknown(hash, now);
        }
        return null;
      }
      if (current) {
        this.unknown.delete(hash);
        this.cache.set(hash, entry);
      }
    }
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) return null;
    return entry.principal;
  }

  /**
   * Notes that a request used the token: its last_used_at is written when this instance has not
   * written it within USAGE_INTERVAL_MS, and the statement itself skips a row another instance
   * wrote within that time. The write runs in the background; a failure is logged, never thrown.
   */
  recordUse(tokenId: string): void {
    const now = this.now();
    const writtenAt = this.usageWrittenAt.get(tokenId);
    if (writtenAt !== undefined && now - writtenAt < TokenAuthenticator.USAGE_INTERVAL_MS) return;
    this.usageWrittenAt.set(tokenId, now);
    this.forgetUsageOlderThanInterval(now);
    const write = this.db.asOperator((tx) => tx.query(
      `update tokens set last_used_at = now()
       where id = $1 and (last_used_at is null or last_used_at < now() - make_interval(secs => $2::integer))`,
      [tokenId, String(TokenAuthenticator.USAGE_INTERVAL_MS / 1000)],
    )).then(
      () => undefined,
      (error: unknown) => this.log?.warn({ tokenId, code: (error as { code?: unknown }).code }, "recording a token's last use failed"),
    ).finally(() => this.usageWrites.delete(write));
    this.usageWrites.add(write);
  }

  /** Resolves once the last_used_at writes under way have finished (before the store closes). */
  async settled(): Promise<void> {
    await Promise.all(this.usageWrites);
  }

  /** Entries past the interval would allow a write anyway; past the bound they are dropped. */
  private forgetUsageOlderThanInterval(now: number): void {
    if (this.usageWrittenAt.size <= TokenAuthenticator.MAX_USAGE_NOTES) return;
    for (const [tokenId, writtenAt] of this.usageWrittenAt) {
      if (now - writtenAt >= TokenAuthenticator.USAGE_INTERVAL_MS) this.usageWrittenAt.delete(tokenId);
    }
  }

  private rememberUnknown(hash: string, now: number): void {
    this.unknown.delete(hash);
    if (this.unknown.size >= TokenAuthenticator.MAX_UNKNOWN_HASHES) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(hash, now + TokenAuthenticator.CACHE_MS);
  }

  /** Drops the token from the cache, so a revocation or a new expiry applies to the next request. */
  forget(tokenId: string): void {
    this.forgetWhere((principal) => principal.tokenId === tokenId);
  }

  /** Drops the consortium's tokens from the cache, so a new member is in their next request's scope. */
  forgetConsortium(consortiumId: string): void {
    this.forgetWhere((principal) => principal.consortiumId === consortiumId);
  }

  /** Lookups under way are left to their requests: the next request looks the token up anew. */
  private forgetWhere(matches: (principal: Principal) => boolean): void {
    this.forgets += 1;
    this.loading.clear();
    for (const [hash, entry] of this.cache) if (matches(entry.principal)) this.cache.delete(hash);
  }

  /**
   * One lookup per hash at a time: the requests that find a token's entry expired together
   * share it. Each used to look it up itself, so every CACHE_MS a busy token sent as many lookups
   * as it had requests in flight (32 at once at 32 connections, on a pool of 10).
   */
  private loadOnce(hash: string, now: number): Promise<CachedPrincipal | null> {
    let pending = this.loading.get(hash);
    if (!pending) {
      const loading = this.load(hash, now).finally(() => {
        if (this.loading.get(hash) === loading) this.loading.delete(hash);
      });
      this.loading.set(hash, pending = loading);
    }
    return pending;
  }

  private async load(hash: string, now: number): Promise<CachedPrincipal | null> {
    const [row] = await this.db.asOperator((tx) => tx.query<{
      id: string; university_id: string | null; consortium_id: string | null; can_write: boolean;
      expires_at_ms: number | null; university_ids: string[];
    }>(
      `select t.id, t.university_id, t.consortium_id, t.can_write,
              (extract(epoch from t.expires_at) * 1000)::float8 as expires_at_ms,
              case when t.university_id is not null then array[t.university_id::text]
                   else array(select u.id::text from universities u where u.consortium_id = t.consortium_id order by u.id) end
                as university_ids
       from tokens t where t.token_hash = $1 and t.revoked_at is null`,
      [hash],
    ));
    if (!row) return null;
    return {
      principal: {
        tokenId: row.id,
        universityId: row.university_id,
        consortiumId: row.consortium_id,
        canWrite: row.can_write,
        universityIds: row.university_ids,
      },
      expiresAtMs: row.expires_at_ms,
      cachedUntilMs: now + TokenAuthenticator.CACHE_MS,
    };
  }
}
