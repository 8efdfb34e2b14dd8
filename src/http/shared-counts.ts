/**
 * The rate-limit counts several instances share through Redis (src/http/rate-limits.ts), as a
 * store for @fastify/rate-limit. Its own Redis store asks Redis on every request, twice for a
 * partner's (the failed-authentication check, then the read count), which cost the cheap page a
 * good part of its throughput (docs/decisions.md, Tokens and limits, has the figures;
 * bench/read-page.ts measures it with BENCH_REDIS_URL).
 *
 * Here a key's count is decided in the instance while it is far from its limit, and exactly near
 * it, as quota-slicing gateways do:
 * - A key's first request in an instance, and every request that takes the count known here
 *   past half its limit, asks Redis, adding the requests admitted here since (`addAndRead`).
 * - Up to half, with a count Redis answered within FRESH_MS, the request is admitted here and
 *   counted; the counts admitted here go to Redis every SYNC_MS, and each answer brings the
 *   other instances' counts back.
 * - Requests that come while the key's question is on its way, far from the limit, wait for its
 *   answer and are decided with it, so a burst at a new or stale key asks once, not once a
 *   request; if the question fails, each asks for itself.
 * - A count is as old as its question: Redis answered after it was sent, so a late answer's
 *   window ends, and its count goes stale, no later than Redis's do.
 * So a limit is exact wherever a refusal is near: a small limit (a test's 1 or 2) asks Redis on
 * every request, and a client whose count has reached half its limit is counted exactly by every
 * instance. Up to half, the count an instance knows leaves out the others' requests since its
 * last answer (at most FRESH_MS old), so a burst spread over several instances faster than they
 * sync can pass up to half the limit at each before any of them asks.
 */
import type { Redis } from 'ioredis';

/** A key's count in its current window, and the milliseconds left of that window (0: no window). */
export interface WindowCount {
  readonly count: number;
  readonly ttlMs: number;
}

/** What the store asks of Redis. */
export interface CountServer {
  /** Adds `by` to the key's count, opening a window of `windowMs` if none is open, and reads it. */
  addAndRead(key: string, by: number, windowMs: number): Promise<WindowCount>;
  read(key: string): Promise<WindowCount>;
}

/** How often the requests admitted in the instance are added to Redis. */
export const SYNC_MS = 100;
/** How old a count answered by Redis may be for a request to be decided in the instance. */
export const FRESH_MS = 1_000;

interface KeyState {
  /** The key's count as Redis last answered it. */
  counted: number;
  /** Requests carried by questions on their way, not yet in `counted`. */
  asked: number;
  /** Requests admitted here since, not yet added in Redis. */
  unsent: number;
  windowMs: number;
  /** When the key's window ends (Date.now() scale); 0 when Redis had no window for it. */
  windowEndsAt: number;
  /** When the question Redis last answered for the key was sent (its count is no older); never, before the first answer. */
  answeredAt: number;
  /** The latest question on its way, settled once its answer is recorded. */
  answer: Promise<WindowCount> | null;
}

/** The store's answer to @fastify/rate-limit: the count with this request, and the window's milliseconds left. */
type StoreCallback = (error: Error | null, result?: { current: number; ttl: number }) => void;

/**
 * The store, with @fastify/rate-limit's store methods (`incr`, `read`, `child`). Counts not yet
 * sent when Redis cannot be reached are dropped: while it is down the limits fail open
 * (docs/operations.md, While Redis is down).
 */
export class SharedCounts {
  private readonly keys = new Map<string, KeyState>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly server: CountServer) {}

  incr(key: string, callback: StoreCallback, windowMs: number, max: number): void {
    this.count(key, callback, windowMs, max, true);
  }

  read(key: string, callback: StoreCallback, windowMs: number, max: number): void {
    this.readCount(key, callback, windowMs, max, true);
  }

  /** The same store for every route: the keys are the limiter's (src/http/rate-limits.ts), route and all. */
  child(): this {
    return this;
  }

  /** Stops syncing, answers still to come included; counts not yet sent are dropped. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.keys.clear();
  }

  /** Counts a request; `mayWait`: it may wait for the key's question on its way (once that failed, it asks itself). */
  private count(key: string, callback: StoreCallback, windowMs: number, max: number, mayWait: boolean): void {
    const now = Date.now();
    const state = this.stateAt(key, windowMs, now);
    const open = state.windowEndsAt > now;
    const near = nearLimit(known(state) + 1, max);
    if (open && this.isFresh(state, now) && !near) {
      state.unsent += 1;
      this.schedule();
      callback(null, { current: known(state), ttl: state.windowEndsAt - now });
      return;
    }
    if (mayWait && this.awaitAnswer(state, near, (answered) => this.count(key, callback, windowMs, max, answered))) return;
    const by = 1 + state.unsent;
    state.unsent = 0;
    this.question(state, this.server.addAndRead(key, by, windowMs), by).then(
      // The count with this request: Redis's, without the requests of questions sent after it.
      (counted) => callback(null, { current: counted.count, ttl: counted.ttlMs }),
      (error: Error) => callback(error),
    );
  }

  private readCount(key: string, callback: StoreCallback, windowMs: number, max: number, mayWait: boolean): void {
    const now = Date.now();
    const state = this.stateAt(key, windowMs, now);
    const near = nearLimit(known(state), max);
    if (this.isFresh(state, now) && !near) {
      callback(null, { current: known(state), ttl: Math.max(0, state.windowEndsAt - now) });
      return;
    }
    if (mayWait && this.awaitAnswer(state, near, (answered) => this.readCount(key, callback, windowMs, max, answered))) return;
    this.question(state, this.server.read(key), 0).then(
      // Every request known here: Redis's count, the questions sent since, and the requests not yet sent.
      (counted) => callback(null, { current: counted.ttlMs > 0 ? known(state) : counted.count, ttl: counted.ttlMs }),
      (error: Error) => callback(error),
    );
  }

  /** The key's state at `now`: a window that has ended counts for nothing, neither Redis's last count of it nor the requests admitted in it. */
  private stateAt(key: string, windowMs: number, now: number): KeyState {
    const kept = this.keys.get(key);
    if (kept !== undefined) {
      if (kept.windowEndsAt <= now) {
        kept.counted = 0;
        kept.unsent = 0;
      }
      return kept;
    }
    const state: KeyState = { counted: 0, asked: 0, unsent: 0, windowMs, windowEndsAt: 0, answeredAt: -Infinity, answer: null };
    if (!this.closed) this.keys.set(key, state);
    // The sync forgets the key if its first question fails, as every key while Redis is down.
    this.schedule();
    return state;
  }

  /** Adds what the instance admitted since the last answer of each key, and forgets the keys no longer used. */
  private sync(): void {
    this.timer = null;
    const now = Date.now();
    for (const [key, state] of this.keys) {
      if (state.unsent > 0 && state.windowEndsAt > now) {
        const by = state.unsent;
        state.unsent = 0;
        this.question(state, this.server.addAndRead(key, by, state.windowMs), by).catch(() => {});
      } else if (state.answer === null && !this.isFresh(state, now)) {
        this.keys.delete(key);
      }
    }
    if (this.keys.size > 0) this.schedule();
  }

  /** Whether Redis answered for the key recently enough to decide here. */
  private isFresh(state: KeyState, now: number): boolean {
    return now - state.answeredAt < FRESH_MS;
  }

  /**
   * Whether the request waits for the key's question on its way, to be decided again once it
   * settles (`decideAgain(true)` after an answer, `false` after a failure: the request then asks
   * for itself, so that one failed question leaves no request uncounted), so that a burst at a
   * new or stale key asks once. Near the limit it does not wait: each request there asks for
   * itself, so that Redis counts it exactly.
   */
  private awaitAnswer(state: KeyState, near: boolean, decideAgain: (answered: boolean) => void): boolean {
    if (state.answer === null || near) return false;
    state.answer.then(() => decideAgain(true), () => decideAgain(false));
    return true;
  }

  /**
   * Counts the question's requests as asked until its answer, then records the answer: Redis
   * answers one connection's questions in order, so an answer holds every earlier question's
   * requests and none of the later ones'.
   */
  private question(state: KeyState, answer: Promise<WindowCount>, by: number): Promise<WindowCount> {
    const sentAt = Date.now();
    state.asked += by;
    const settle = () => {
      state.asked -= by;
      if (state.answer === recorded) state.answer = null;
    };
    const recorded = answer.then((counted) => {
      settle();
      this.answered(state, counted, sentAt);
      return counted;
    }, (error: unknown) => {
      settle();
      throw error;
    });
    state.answer = recorded;
    return recorded;
  }

  /**
   * Records an answer as of when its question was sent: Redis answered at some point after, so
   * the window ends no later, and the count is no older, than this says.
   */
  private answered(state: KeyState, { count, ttlMs }: WindowCount, sentAt: number): void {
    Object.assign(state, { counted: count, windowEndsAt: ttlMs > 0 ? sentAt + ttlMs : 0, answeredAt: sentAt });
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => this.sync(), SYNC_MS);
    this.timer.unref();
  }
}

/** The count a key has as far as the instance knows: Redis's last answer, the questions on their way, and its own. */
function known(state: KeyState): number {
  return state.counted + state.asked + state.unsent;
}

/** Whether a count is near enough its limit (past half of it) for Redis to decide. */
function nearLimit(count: number, max: number): boolean {
  return count * 2 > max;
}

/**
 * `server` with a breaker: once a question fails (Redis refused it, dropped the connection, or
 * stalled past the command timeout), every question fails at once for `retryAfterMs`, and then
 * one asks whether Redis is back while the others still fail at once. So a stalled Redis costs
 * the command timeout only to the requests that asked before the first question timed out, then
 * in each `retryAfterMs` to the one that asks (and to requests of its key that wait for that
 * answer: SharedCounts.awaitAnswer), not to every request once per question (a partner's asks
 * two: the failed-authentication check and its count); the limits fail open meanwhile.
 * `onChange` hears each change of availability once.
 */
export function failingFast(server: CountServer, retryAfterMs: number, onChange: (available: boolean, error?: Error) => void): CountServer {
  let available = true;
  let retryAt = 0;
  let probing = false;
  const ask = (question: () => Promise<WindowCount>): Promise<WindowCount> => {
    if (!available && (probing || Date.now() < retryAt)) return Promise.reject(new Error('The rate-limit store is unavailable.'));
    const probe = !available;
    probing ||= probe;
    // A question that throws at once settles like one that fails, so a probe never stays out.
    return new Promise<WindowCount>((resolve) => resolve(question())).then((answer) => {
      if (probe) probing = false;
      if (!available) {
        available = true;
        onChange(true);
      }
      return answer;
    }, (error: Error) => {
      if (probe) probing = false;
      retryAt = Date.now() + retryAfterMs;
      if (available) {
        available = false;
        onChange(false, error);
      }
      throw error;
    });
  };
  return {
    addAndRead: (key, by, windowMs) => ask(() => server.addAndRead(key, by, windowMs)),
    read: (key) => ask(() => server.read(key)),
  };
}

/** Adds to a key's count and reads it in one step; a key without a window gets one. */
const ADD_AND_READ = `
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {count, ttl}`;

const READ = `
local count = redis.call('GET', KEYS[1])
if not count then return {0, 0} end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {tonumber(count), ttl}`;

type ScriptedRedis = Redis & {
  pdsAddAndRead(key: string, by: number, windowMs: number): Promise<[number, number]>;
  pdsReadCount(key: string): Promise<[number, number]>;
};

/** The counts in Redis under `prefix`, each step one script (one round trip). */
export function redisCountServer(redis: Redis, prefix: string): CountServer {
  redis.defineCommand('pdsAddAndRead', { numberOfKeys: 1, lua: ADD_AND_READ });
  redis.defineCommand('pdsReadCount', { numberOfKeys: 1, lua: READ });
  const scripted = redis as ScriptedRedis;
  const windowCount = ([count, ttlMs]: [number, number]): WindowCount => ({ count, ttlMs });
  return {
    addAndRead: (key, by, windowMs) => scripted.pdsAddAndRead(prefix + key, by, windowMs).then(windowCount),
    read: (key) => scripted.pdsReadCount(prefix + key).then(windowCount),
  };
}
