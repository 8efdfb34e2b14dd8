/**
 * The pool of sessions to one PostgreSQL server (src/db/postgres-sessions.ts), by tarn: leases of
 * a session to one caller at a time, the last few of them kept for scopes that hold none, and for
 * reads of one scope a second lease of a busy session (SessionPool.share).
 */
import { Pool, TimeoutError } from 'tarn';
import { CONNECTION_LIFETIME_MS, Lease, Session } from './postgres-sessions.ts';
import { type PoolStats, type StoreTimeouts, StoreUnavailableError } from './store.ts';

type PoolLimits = StoreTimeouts & { maxConnections: number };

/**
 * The statements a session may have in flight when a read shares it (SessionPool.share): its
 * owner's and one sent behind it, so that the server has the next statement when it finishes the
 * first. One university's cheap page at 32 connections on 10 sessions, in 12 s of interleaved
 * rounds, four times: 46,100–48,900 answers with no sharing, 53,100–55,500 with two statements
 * in flight; twice with three: 53,000–55,800. p99 stayed at 17–24 ms; p99.9 went from 28–35 ms to
 * 54–85 ms with two and 104–114 ms with three, since a server session that stalls holds up every
 * statement sent on it.
 */
const MAX_SHARED_IN_FLIGHT = 2;

/**
 * The most sessions of a pool that leases for one scope (a reader's, SessionPool.lease) hold at
 * once when no other lease holds one: the rest, a fifth, are kept for scopes that hold none
 * (SessionPool.admissible). A dozen reads of one university that each ran to the statement
 * timeout took all ten reader sessions, and other universities' reads waited the pool wait and
 * were answered 503; a share for each scope alone still let two universities' slow reads take
 * them all. Beyond it a scope's reads share its own sessions (SessionPool.share) or wait for one
 * of them to end.
 */
const scopeShare = (maxConnections: number): number => Math.max(1, Math.floor(maxConnections * 0.8));

export const shuttingDown = () => new StoreUnavailableError('CONNECTION_ENDED', 'The service is shutting down.');

/** A lease for a scope that waits until it may take a session (SessionPool.admit). */
interface ScopeWaiter {
  readonly scope: string;
  admit(): void;
  refuse(error: Error): void;
}

/**
 * Sessions to one server, pooled by tarn: at most `maxConnections`, and a caller waits at most
 * `poolWaitMs` for one. A session is checked when it is handed out: a lost one, or one past its
 * lifetime, is destroyed there and another taken or opened in its place.
 */
export class SessionPool {
  private readonly pool: Pool<Session>;
  /** Every session not yet destroyed, handed out or not, so that close() can end them all. */
  private readonly sessions = new Set<Session>();
  private readonly waiting = new Set<ReturnType<Pool<Session>['acquire']>>();
  /** The sessions handed out whose owners hold them still, which share() may lease once more. */
  private readonly owned = new Set<Session>();
  /**
   * The leases not yet ended of each session handed out, its owner's and the shared ones. It goes
   * back to the pool when the last ends, so a session handed out has nothing in flight.
   */
  private readonly leases = new Map<Session, number>();
  /** The scope each session was leased for, if any, until it goes back to the pool. */
  private readonly scopeOf = new Map<Session, string>();
  /** Sessions held per scope, and leases admitted to take one (SessionPool.admissible). */
  private readonly heldByScope = new Map<string, number>();
  /** The sum of heldByScope, and the sessions handed out for no scope. */
  private heldForScopes = 0;
  private heldForNone = 0;
  /** Leases for a scope waiting to be admitted, in the order they came. */
  private readonly scopeWaiters: ScopeWaiter[] = [];
  /** The sessions only a scope that holds none may take. */
  private readonly reserve: number;
  private closed = false;

  constructor(url: string, private readonly limits: PoolLimits, startupParameters: Readonly<Record<string, string>> = {}) {
    this.reserve = limits.maxConnections - scopeShare(limits.maxConnections);
    this.pool = new Pool<Session>({
      min: 0,
      max: limits.maxConnections,
      acquireTimeoutMillis: limits.poolWaitMs,
      // Opening a session sends nothing: it connects on its first statement, in one pipeline with
      // it, and a failed connect fails that statement at once. A create that throws (a malformed
      // URL) fails the caller then too, instead of being retried until the wait runs out.
      create: () => {
        const session = new Session(url, limits, startupParameters);
        this.sessions.add(session);
        return session;
      },
      propagateCreateError: true,
      validate: (session) => !session.lost && Date.now() - session.openedAt < CONNECTION_LIFETIME_MS,
      destroy: (session) => {
        this.sessions.delete(session);
        return session.sql.end({ timeout: 5 });
      },
      // An idle session past its lifetime would not pass validate; end it without waiting for a caller.
      idleTimeoutMillis: CONNECTION_LIFETIME_MS,
    });
  }

  /**
   * A session of its own for the caller, within the pool wait. A lease for a `scope` that holds
   * sessions already first waits, within the same pool wait, until it may take another
   * (admissible).
   */
  async lease(storeWaitMs = this.limits.storeWaitMs, scope: string | null = null): Promise<Lease> {
    if (this.closed) throw shuttingDown();
    const deadline = Date.now() + this.limits.poolWaitMs;
    if (scope !== null) {
      await this.admit(scope);
      if (this.closed) {
        this.leave(scope);
        throw shuttingDown();
      }
    }
    try {
      const session = await this.acquire(deadline - Date.now());
      this.owned.add(session);
      this.leases.set(session, 1);
      if (scope !== null) this.scopeOf.set(session, scope);
      else this.heldForNone++;
      return new Lease(session, storeWaitMs);
    } catch (error) {
      if (scope !== null) this.leave(scope);
      throw error;
    }
  }

  /** A session from tarn within `withinMs` (at most the pool wait, tarn's own timeout). */
  private async acquire(withinMs: number): Promise<Session> {
    if (withinMs <= 0) throw this.poolTimeout();
    const acquire = this.pool.acquire();
    this.waiting.add(acquire);
    let timedOut = false;
    const timer = withinMs < this.limits.poolWaitMs ? setTimeout(() => {
      timedOut = true;
      acquire.abort();
    }, Math.max(0, withinMs)) : null;
    try {
      return await acquire.promise;
    } catch (error) {
      if (this.closed) throw shuttingDown();
      if (error instanceof TimeoutError || timedOut) throw this.poolTimeout();
      throw error;
    } finally {
      if (timer) clearTimeout(timer);
      this.waiting.delete(acquire);
    }
  }

  private poolTimeout(): StoreUnavailableError {
    return new StoreUnavailableError('POOL_TIMEOUT', `No data store connection came free within ${this.limits.poolWaitMs} ms.`);
  }

  /**
   * Whether a lease for `scope` may take a session: one whose scope holds none always may; else
   * only while more than `reserve` sessions stay free, so that a scope alone holds at most
   * scopeShare(maxConnections), and two or more leave the last ones to the scopes that hold none.
   */
  private admissible(scope: string): boolean {
    return !this.heldByScope.has(scope) || this.limits.maxConnections - this.heldForScopes - this.heldForNone > this.reserve;
  }

  private hold(scope: string): void {
    this.heldByScope.set(scope, (this.heldByScope.get(scope) ?? 0) + 1);
    this.heldForScopes++;
  }

  /** Counts a lease for `scope` once it is admissible, within the pool wait. */
  private admit(scope: string): Promise<void> {
    if (this.admissible(scope)) {
      this.hold(scope);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => waiter.refuse(new StoreUnavailableError('POOL_TIMEOUT',
        `The reads of this scope hold their share of the data store connections; none came free for them within ${this.limits.poolWaitMs} ms.`)), this.limits.poolWaitMs);
      const settle = () => {
        clearTimeout(timer);
        const at = this.scopeWaiters.indexOf(waiter);
        if (at >= 0) this.scopeWaiters.splice(at, 1);
      };
      const waiter: ScopeWaiter = {
        scope,
        admit: () => { settle(); resolve(); },
        refuse: (error) => { settle(); reject(error); },
      };
      this.scopeWaiters.push(waiter);
    });
  }

  /** A lease for `scope` ended or failed. */
  private leave(scope: string): void {
    const held = this.heldByScope.get(scope)! - 1;
    if (held > 0) this.heldByScope.set(scope, held);
    else this.heldByScope.delete(scope);
    this.heldForScopes--;
    this.admitWaiters();
  }

  /** Admits, in the order they came, the waiting leases that now may take a session. */
  private admitWaiters(): void {
    // Every lease that ends comes here, and the queue is all but always empty: no copy of it then.
    if (this.scopeWaiters.length === 0) return;
    for (const waiter of [...this.scopeWaiters]) {
      if (!this.admissible(waiter.scope)) continue;
      this.hold(waiter.scope);
      waiter.admit();
    }
  }

  /**
   * When every session is in use and no more may be opened, or `scope` may take no more of them
   * (admissible), a second lease of the handed-out session that `accepts` with the fewest statements in flight, fewer than
   * MAX_SHARED_IN_FLIGHT; else null, and the caller waits for a session of its own (lease). Its
   * statements are sent behind the others on that session, in one pipeline, as postgres.js's own
   * pool sends a query on a busy connection. The session goes back to the pool only once every
   * lease of it has ended: whoever takes it next, in another scope perhaps, sends nothing behind
   * a statement of the last scope. postgres.js sends a prepared statement again at the end of its
   * pipeline when the server refuses its cached plan (a table's columns changed): behind a scope
   * change, it would run in the new scope. Only a reader's statement alone may share
   * (src/db/postgres-store.ts readOnReaderSession): it runs in no transaction of its own and
   * takes none over.
   */
  share(accepts: (session: Session) => boolean, scope: string): Lease | null {
    if (this.closed) return null;
    const full = this.pool.numFree() === 0 && this.pool.numUsed() + this.pool.numPendingCreates() >= this.limits.maxConnections;
    if (!full && this.admissible(scope)) return null;
    let least: Session | null = null;
    for (const session of this.owned) {
      if (!session.lost && session.inFlight < MAX_SHARED_IN_FLIGHT && accepts(session) && (!least || session.inFlight < least.inFlight)) least = session;
    }
    if (!least) return null;
    this.leases.set(least, this.leases.get(least)! + 1);
    // Its clock runs while the statement ahead of it runs, each within the statement timeout.
    return new Lease(least, this.limits.storeWaitMs * MAX_SHARED_IN_FLIGHT, true);
  }

  stats(): PoolStats {
    // Every lease not yet ended, less one per session whose owner holds it still.
    let leases = 0;
    for (const count of this.leases.values()) leases += count;
    return { inUse: this.pool.numUsed(), waiting: this.pool.numPendingAcquires() + this.scopeWaiters.length, shared: leases - this.owned.size };
  }

  release(lease: Lease): void {
    lease.end();
    const { session } = lease;
    if (!lease.shared) this.owned.delete(session);
    const left = this.leases.get(session)! - 1;
    if (left > 0) {
      this.leases.set(session, left);
    } else {
      this.leases.delete(session);
      const scope = this.scopeOf.get(session);
      this.scopeOf.delete(session);
      this.pool.release(session);
      if (scope !== undefined) {
        this.leave(scope);
      } else {
        this.heldForNone--;
        this.admitWaiters();
      }
    }
  }

  /** Callers still waiting are refused at once; sessions in use are ended with the idle ones. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of [...this.scopeWaiters]) waiter.refuse(shuttingDown());
    for (const acquire of this.waiting) acquire.abort();
    await Promise.all([...this.sessions].map((session) => session.sql.end({ timeout: 5 })));
    await this.pool.destroy();
  }
}
