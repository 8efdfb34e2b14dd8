/**
 * Who may be sent a large page now. A page of more than LIMITS.wholePageRows rows is sent as its
 * client reads it, and holds a connection of the transactions' pool until then (readStreamed in
 * src/query/execute.ts): ten such pages from one token whose client stopped reading held all ten
 * connections for about a minute each, and every other university's writes and token lookups
 * answered 503. So one scope is sent at most LIMITS.largePagesPerScope at once (429
 * TOO_MANY_LARGE_PAGES), and all scopes together at most half the pool (503 DATABASE_BUSY): the
 * other half is always there for writes, lookups and the operator. Both counts are an instance's.
 * The embedded store has one session, which a large page holds (docs/operations.md).
 */
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';

export class LargePageSlots {
  private readonly byScope = new Map<string, number>();
  private sending = 0;
  private readonly capacity: number;

  constructor(transactionConnections: number) {
    this.capacity = Math.max(1, Math.floor(transactionConnections / 2));
  }

  /** A slot for a large page to `scope` (its scope setting), or the refusal; the returned function gives it back, once. */
  take(scope: string): () => void {
    const held = this.byScope.get(scope) ?? 0;
    if (held >= LIMITS.largePagesPerScope) throw apiError('TOO_MANY_LARGE_PAGES');
    if (this.sending >= this.capacity) throw apiError('DATABASE_BUSY', 'large pages');
    this.byScope.set(scope, held + 1);
    this.sending++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.sending--;
      const left = this.byScope.get(scope)! - 1;
      if (left === 0) this.byScope.delete(scope);
      else this.byScope.set(scope, left);
    };
  }
}
