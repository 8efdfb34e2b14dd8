/**
 * Bearer tokens: opaque random strings with a recognisable prefix, stored only as SHA-256
 * hashes, revocable and optionally expiring (docs/decisions.md, "Tokens and limits").
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Database, Scope } from '../db/database.ts';
import type { Queryable } from '../db/store.ts';

const TOKEN_PREFIX = 'pds_';

export interface Principal extends Scope {
  readonly tokenId: string;
  /** Set for a single-university token, null for a consortium token. */
  readonly universityId: string | null;
  readonly consortiumId: string | null;
  readonly canWrite: boolean;
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export interface IssuedToken {
  id: string;
  token: string;
  university_id: string | null;
  consortium_id: string | null;
  can_write: boolean;
  label: string | null;
  expires_at: string | null;
  created_at: string;
}

export async function issueToken(
  tx: Queryable,
  grant: { universityId?: string | null; consortiumId?: string | null; canWrite?: boolean; expiresAt?: string | null; label?: string | null },
): Promise<IssuedToken> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const [row] = await tx.query<Omit<IssuedToken, 'token'>>(
    `insert into tokens (token_hash, university_id, consortium_id, can_write, expires_at, label)
     values ($1, $2, $3, $4, $5, $6)
     returning id, university_id, consortium_id, can_write, label, expires_at::text, created_at::text`,
    [hashToken(token), grant.universityId ?? null, grant.consortiumId ?? null, String(grant.canWrite ?? false), grant.expiresAt ?? null, grant.label ?? null],
  );
  return { ...row, token };
}

export async function revokeToken(tx: Queryable, id: string): Promise<boolean> {
  const rows = await tx.query('update tokens set revoked_at = now() where id = $1 and revoked_at is null returning id', [id]);
  return rows.length > 0;
}

interface CachedPrincipal {
  readonly principal: Principal;
  readonly expiresAtMs: number | null;
  readonly cachedUntilMs: number;
}

/**
 * Resolves a bearer token to its principal. Lookups are cached briefly because every request
 * needs one; a revocation through this instance takes effect at once, one through another
 * instance within CACHE_MS. Unknown hashes are remembered as long, so a repeated bad token
 * costs one lookup, not one per request.
 */
export class TokenAuthenticator {
  static readonly CACHE_MS = 5_000;
  /** Bounds the memory random tokens can take; the oldest unknown hash is forgotten first. */
  static readonly MAX_UNKNOWN_HASHES = 10_000;
  private readonly cache = new Map<string, CachedPrincipal>();
  /** Hash → until when it is known to match no active token. */
  private readonly unknown = new Map<string, number>();

  constructor(private readonly db: Database) {}

  async authenticate(token: string): Promise<Principal | null> {
    if (!token.startsWith(TOKEN_PREFIX)) return null;
    const hash = hashToken(token);
    const now = Date.now();
    let entry = this.cache.get(hash) ?? null;
    if (!entry || entry.cachedUntilMs < now) {
      if ((this.unknown.get(hash) ?? 0) >= now) return null;
      entry = await this.load(hash, now);
      if (!entry) {
        this.cache.delete(hash);
        this.rememberUnknown(hash, now);
        return null;
      }
      this.unknown.delete(hash);
      this.cache.set(hash, entry);
    }
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) return null;
    return entry.principal;
  }

  private rememberUnknown(hash: string, now: number): void {
    this.unknown.delete(hash);
    if (this.unknown.size >= TokenAuthenticator.MAX_UNKNOWN_HASHES) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(hash, now + TokenAuthenticator.CACHE_MS);
  }

  forget(tokenId: string): void {
    for (const [hash, entry] of this.cache) if (entry.principal.tokenId === tokenId) this.cache.delete(hash);
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
