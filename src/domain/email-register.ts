/**
 * The service-wide address register (migration 004): who holds each address, keyed by the
 * SHA-256 of the address. Uniqueness across universities is its primary key; within a
 * university the tables' own unique indexes hold too. Erasure keeps an erased student's entry,
 * marked, so the address is never recreated; the register never stores the address itself.
 */
import { createHash } from 'node:crypto';
import { arrayLiteral } from '../db/array-literal.ts';
import type { Queryable } from '../db/store.ts';
import { valuesList } from '../db/values.ts';
import { isAscii } from '../resources/text.ts';

/**
 * An address as the service compares and stores it: trimmed and lower-cased (docs/decisions.md,
 * Student writes), Greek's final sigma as σ, accents composed (Unicode NFC). Lower-casing writes Σ
 * as ς at the end of a word and σ elsewhere, so `ΝΙΚΟΣ@` and `νικοσ@`, one address compared
 * case-insensitively, were two: two accounts, a PATCH that found no student, another university's
 * create that passed the register. So were `é` and `e` with a combining accent, one character by
 * Unicode's canonical equivalence (migrations 014 and 015 re-key what was stored before).
 */
export function emailKey(email: string): string {
  const lowered = email.trim().toLowerCase();
  // An ASCII address has no sigma and nothing to compose: a 500-row batch's keys took 90 µs with
  // both steps and 29 with neither.
  return isAscii(lowered) ? lowered : lowered.replaceAll('ς', 'σ').normalize('NFC');
}

/** Hex SHA-256 of the UTF-8 text: the register's key, and the erased tombstones' hashes. */
export const sha256Hex = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex');

/**
 * Claims addresses for students of the university; returns those it won (all but the ones
 * someone else holds or took meanwhile). Claims go in key order: a claim waits on a key another
 * transaction holds, and two taking the same keys in opposite orders would each wait on the
 * other. On Citus the shards are visited one after another (citus.multi_shard_modify_mode is
 * 'sequential' in a batch, src/db/locks.ts), so the order holds across shards too.
 */
export async function claimAddresses(tx: Queryable, universityId: string, emails: readonly string[]): Promise<Set<string>> {
  if (emails.length === 0) return new Set();
  const byHash = new Map([...new Set(emails)].map((e) => [sha256Hex(e), e]));
  const hashes = [...byHash.keys()].sort();
  const list = valuesList<string>([{ name: 'email_hash', type: 'text', value: (h) => h }], hashes, 2, ['$1::uuid', `'student'`]);
  const inserted = await tx.query<{ email_hash: string }>(
    `insert into email_register (university_id, kind, ${list.columns}) values ${list.rows}
     on conflict do nothing returning email_hash`,
    [universityId, ...list.params]);
  return new Set(inserted.map((r) => byHash.get(r.email_hash)!));
}

/** Claims one address for an account the operator creates; false when it is taken. */
export async function claimAccountAddress(tx: Queryable, email: string, kind: string, universityId: string | null): Promise<boolean> {
  const inserted = await tx.query(
    `insert into email_register (email_hash, kind, university_id) values ($1, $2, $3::uuid) on conflict do nothing returning email_hash`,
    [sha256Hex(email), kind, universityId]);
  return inserted.length > 0;
}

/**
 * After erasure every address of the student stays held, marked erased: the primary and each
 * secondary address, verified (a login) or not, so that none creates the person again
 * (ACCOUNT_DELETED).
 */
export async function markErasedAddresses(tx: Queryable, addresses: readonly string[]): Promise<void> {
  await tx.query('update email_register set erased = true where email_hash = any($1::text[])', [arrayLiteral(addresses.map(sha256Hex))]);
}
