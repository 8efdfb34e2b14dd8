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
  /** Requests admitted here since, not yet added in Redis. */
  unsent: number;
  windowMs: number;
  /** When the key's window ends (Date.now() scale); 0 when Redis had no window for it. */
  windowEndsAt: number;
  answeredAt: number;
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
    const now = Date.now();
    const state = this.keys.get(key);
    const open = state !== undefined && state.windowEndsAt > now;
    if (open && this.isFresh(state, now) && !nearLimit(state.counted + state.unsent + 1, max)) {
      state.unsent += 1;
      this.schedule();
      callback(null, { current: state.counted + state.unsent, ttl: state.windowEndsAt - now });
      return;
    }
    const by = 1 + (open ? state.unsent : 0);
    if (state) state.unsent = 0;
    this.ask(key, this.server.addAndRead(key, by, windowMs), windowMs, callback);
  }

  read(key: string, callback: StoreCallback, windowMs: number, max: number): void {
    const now = Date.now();
    const state = this.keys.get(key);
    if (state && this.isFresh(state, now) && !nearLimit(state.counted + state.unsent, max)) {
      callback(null, { current: state.counted + state.unsent, ttl: Math.max(0, state.windowEndsAt - now) });
      return;
    }
    this.ask(key, this.server.read(key), windowMs, callback);
  }

  /** The same store for every route: the keys are the limiter's (src/http/rate-limits.ts), route and all. */
  child(): this {
    return this;
  }

  /** Adds what the instance admitted since the last answer of each key, and forgets the keys no longer used. */
  private sync(): void {
    this.timer = null;
    const now = Date.now();
    for (const [key, state] of this.keys) {
      if (state.unsent > 0 && state.windowEndsAt > now) {
        const by = state.unsent;
        state.unsent = 0;
        this.server.addAndRead(key, by, state.windowMs).then((answer) => this.answered(key, answer, state.windowMs), () => {});
      } else if (!this.isFresh(state, now)) {
        // Unsent counts of a window that has ended count for nothing.
        this.keys.delete(key);
      }
    }
    if (this.keys.size > 0) this.schedule();
  }

  /** Stops syncing, answers still to come included; counts not yet sent are dropped. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.keys.clear();
  }

  /** Whether Redis answered for the key recently enough to decide here. */
  private isFresh(state: KeyState, now: number): boolean {
    return now - state.answeredAt < FRESH_MS;
  }

  private ask(key: string, answer: Promise<WindowCount>, windowMs: number, callback: StoreCallback): void {
    answer.then((counted) => {
      this.answered(key, counted, windowMs);
      callback(null, { current: counted.count, ttl: counted.ttlMs });
    }, (error: Error) => callback(error));
  }

  private answered(key: string, { count, ttlMs }: WindowCount, windowMs: number): void {
    if (this.closed) return;
    const now = Date.now();
    const state = this.keys.get(key);
    const windowEndsAt = ttlMs > 0 ? now + ttlMs : 0;
    if (state) Object.assign(state, { counted: count, windowMs, windowEndsAt, answeredAt: now });
    else this.keys.set(key, { counted: count, unsent: 0, windowMs, windowEndsAt, answeredAt: now });
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.sync(), SYNC_MS);
    this.timer.unref();
  }
}

/** Whether a count is near enough its limit (past half of it) for Redis to decide. */
function nearLimit(count: number, max: number): boolean {
  return count * 2 > max;
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
