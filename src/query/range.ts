/**
 * The Range header (PostgREST's RangeQuery): `first-last` or `first-`. Any other form is ignored,
 * as PostgREST ignores it; the planner intersects the range with `limit` and `offset`.
 */
import type { ReadSyntax } from './syntax.ts';

export function parseRangeHeader(header: string | undefined): ReadSyntax['rangeHeader'] {
  const match = header === undefined ? null : /^(\d+)-(\d*)$/.exec(header.trim());
  if (!match) return null;
  return { first: BigInt(match[1]), last: match[2] === '' ? null : BigInt(match[2]) };
}
