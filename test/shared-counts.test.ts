/**
 * Rate-limit counts shared through Redis (src/http/shared-counts.ts): decided in the instance far
 * from a limit, by Redis near it; the instance's counts sent every SYNC_MS. The store's rules on
 * a counting server in memory, on a mocked clock; then on real Redis, two instances sharing one
 * limit, and how often a partner's requests ask Redis.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { Redis } from 'ioredis';
import { type CountServer, FRESH_MS, SYNC_MS, SharedCounts, type WindowCount, failingFast } from '../src/http/shared-counts.ts';
import { eventually } from './support/eventually.ts';
import { Harness } from './support/harness.ts';

const WINDOW_MS = 60_000;

/** Redis's side, in memory, on the (mocked) clock: counts by key with their windows, and the calls made. */
class CountingServer implements CountServer {
  readonly counts = new Map<string, { count: number; endsAt: number }>();
  calls = 0;
  failing = false;
  /** How many of the next calls fail. */
  failNext = 0;
  /** How long after counting an answer reaches the instance (a busy loop, a slow network). */
  answerAfterMs = 0;

  async addAndRead(key: string, by: number, windowMs: number): Promise<WindowCount> {
    this.called();
    const now = Date.now();
    let entry = this.counts.get(key);
    if (!entry || entry.endsAt <= now) this.counts.set(key, entry = { count: 0, endsAt: now + windowMs });
    entry.count += by;
    return this.answer({ count: entry.count, ttlMs: entry.endsAt - now });
  }

  async read(key: string): Promise<WindowCount> {
    this.called();
    const entry = this.counts.get(key);
    return this.answer(!entry || entry.endsAt <= Date.now() ? { count: 0, ttlMs: 0 } : { count: entry.count, ttlMs: entry.endsAt - Date.now() });
  }

  private called(): void {
    this.calls += 1;
    if (this.failing || this.failNext > 0) {
      this.failNext = Math.max(0, this.failNext - 1);
      throw new Error('Redis is down');
    }
  }

  private async answer(counted: WindowCount): Promise<WindowCount> {
    if (this.answerAfterMs > 0) await new Promise((resolve) => setTimeout(resolve, this.answerAfterMs));
    return counted;
  }

  countOf(key: string): number {
    return this.counts.get(key)?.count ?? 0;
  }
}

const incr = (store: SharedCounts, key: string, max: number, windowMs = WINDOW_MS) => new Promise<number>((resolve, reject) =>
  store.incr(key, (error, result) => (error ? reject(error) : resolve(result!.current)), windowMs, max));
const read = (store: SharedCounts, key: string, max: number) => new Promise<number>((resolve, reject) =>
  store.read(key, (error, result) => (error ? reject(error) : resolve(result!.current)), WINDOW_MS, max));
/** Lets the mocked timers fire and the answers they caused settle. */
async function pass(ms: number): Promise<void> {
  mock.timers.tick(ms);
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => queueMicrotask(resolve));
}

describe('shared counts, on a counting server', () => {
  let server: CountingServer;
  const stores: SharedCounts[] = [];
  const instance = () => {
    const store = new SharedCounts(server);
    stores.push(store);
    return store;
  };
  beforeEach(() => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    server = new CountingServer();
  });
  afterEach(() => {
    for (const store of stores.splice(0)) store.close();
    mock.timers.reset();
  });

  test('a small limit asks the server on every request, so two instances refuse the third of two', async () => {
    const [one, two] = [instance(), instance()];
    assert.equal(await incr(one, 'read:a', 2), 1);
    assert.equal(await incr(two, 'read:a', 2), 2);
    assert.equal(await incr(one, 'read:a', 2), 3);
    assert.equal(server.calls, 3);
  });

  test('up to half its limit a key is counted in the instance; past half, every request asks the server', async () => {
    const one = instance();
    const seen: number[] = [];
    for (let i = 0; i < 50; i++) seen.push(await incr(one, 'read:a', 100));
    assert.deepEqual(seen, Array.from({ length: 50 }, (_, i) => i + 1));
    // The first request asked; the next 49 were counted here.
    assert.equal(server.calls, 1);
    assert.equal(server.countOf('read:a'), 1);
    // The 51st takes the count past half: it asks, carrying the 49.
    assert.equal(await incr(one, 'read:a', 100), 51);
    assert.equal(server.countOf('read:a'), 51);
    assert.equal(await incr(one, 'read:a', 100), 52);
    assert.equal(server.calls, 3);
  });

  test('the counts of each instance reach the server within SYNC_MS, and come back to the others with their next answer', async () => {
    const [one, two] = [instance(), instance()];
    for (let i = 0; i < 10; i++) {
      await incr(one, 'read:a', 1000);
      await incr(two, 'read:a', 1000);
    }
    assert.equal(server.countOf('read:a'), 2);
    await pass(SYNC_MS);
    assert.equal(server.countOf('read:a'), 20);
    assert.equal(await incr(one, 'read:a', 1000), 21 - 9, 'one knows its own answer, not yet two\'s last nine');
    await pass(SYNC_MS);
    assert.equal(await incr(one, 'read:a', 1000), 22);
  });

  test('a count older than FRESH_MS is asked again, carrying what was counted here', async () => {
    const one = instance();
    await incr(one, 'read:a', 1000);
    await incr(one, 'read:a', 1000);
    server.failing = true;
    await pass(SYNC_MS);
    server.failing = false;
    // The sync failed: its count is lost, as while Redis is down. The next request past FRESH_MS asks.
    await pass(FRESH_MS);
    const calls = server.calls;
    assert.equal(await incr(one, 'read:a', 1000), 2);
    assert.equal(server.calls, calls + 1);
  });

  test('a new window starts from the server, not from the counts of the last one', async () => {
    const one = instance();
    await incr(one, 'read:a', 1000);
    await pass(SYNC_MS);
    await incr(one, 'read:a', 1000);
    mock.timers.tick(WINDOW_MS);
    assert.equal(await incr(one, 'read:a', 1000), 1);
  });

  test('a burst at a new or stale key asks once and is decided with the answer; near the limit each request still asks', async () => {
    const one = instance();
    const burst = (count: number, max: number) => Promise.all(Array.from({ length: count }, () => incr(one, 'read:a', max)));
    assert.deepEqual((await burst(10, 1000)).sort((a, b) => a - b), Array.from({ length: 10 }, (_, i) => i + 1));
    assert.equal(server.calls, 1);
    await pass(SYNC_MS);
    assert.equal(server.calls, 2, 'the nine counted here are sent');
    // The clock moves past FRESH_MS without the timers firing, as on a busy event loop: the count is stale.
    mock.timers.setTime(Date.now() + FRESH_MS);
    assert.deepEqual(await Promise.all(Array.from({ length: 10 }, () => read(one, 'read:a', 1000))), Array(10).fill(10));
    assert.equal(server.calls, 3);
    // Limit 24: the 13th request takes the count past half, so from there every request asks.
    assert.deepEqual(await burst(5, 24), [11, 12, 13, 14, 15]);
    assert.equal(server.calls, 6);
    assert.equal(server.countOf('read:a'), 15);
    assert.deepEqual(await burst(10, 24), Array.from({ length: 10 }, (_, i) => 16 + i));
    assert.equal(server.calls, 16);
  });

  test('when the question a burst waits for fails, each waiting request asks for itself and is counted', async () => {
    const one = instance();
    server.failNext = 1;
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, () => incr(one, 'read:a', 10)));
    // The limiter lets the first through uncounted (skipOnError); the other four are counted.
    assert.deepEqual(outcomes.map((o) => o.status), ['rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    assert.equal(server.countOf('read:a'), 4);
    assert.equal(server.calls, 5);
  });

  test('a read that asks adds the requests counted here and not yet sent', async () => {
    const one = instance();
    for (let i = 0; i < 5; i++) await incr(one, 'auth-failure:a', 10);
    // The other instances' three, while the four counted here wait for the sync (its timer late).
    await server.addAndRead('auth-failure:a', 3, WINDOW_MS);
    mock.timers.setTime(Date.now() + FRESH_MS);
    assert.equal(await read(one, 'auth-failure:a', 10), 8);
  });

  test('a late answer\'s window ends when Redis\'s does: requests counted here as it ends are not sent into the next window', async () => {
    const one = instance();
    const started = Date.now();
    server.answerAfterMs = 200;
    const first = incr(one, 'read:a', 1000, 1000);
    await pass(200);
    assert.equal(await first, 1);
    server.answerAfterMs = 0;
    await pass(750);
    // 50 ms before Redis ends the window: counted here.
    for (let i = 0; i < 3; i++) await incr(one, 'read:a', 1000, 1000);
    await pass(SYNC_MS);
    assert.ok(Date.now() >= started + 1000);
    assert.deepEqual(await server.read('read:a'), { count: 0, ttlMs: 0 }, 'nothing was sent into the next window');
    assert.equal(await incr(one, 'read:a', 1000, 1000), 1);
  });

  test('a read is answered in the instance while the count is fresh and below half its limit', async () => {
    const one = instance();
    assert.equal(await read(one, 'auth-failure:a', 10), 0);
    assert.equal(await read(one, 'auth-failure:a', 10), 0);
    assert.equal(server.calls, 1);
    await pass(FRESH_MS);
    await read(one, 'auth-failure:a', 10);
    assert.equal(server.calls, 2);
    // Near the limit every read asks: failures elsewhere block the source here at once.
    for (let i = 0; i < 6; i++) await incr(instance(), 'auth-failure:a', 10);
    assert.equal(await read(one, 'auth-failure:a', 10), 0, 'still fresh and far from the limit as far as one knows');
    await pass(FRESH_MS);
    assert.equal(await read(one, 'auth-failure:a', 10), 6);
    const calls = server.calls;
    assert.equal(await read(one, 'auth-failure:a', 10), 6);
    assert.equal(server.calls, calls + 1);
  });

  test('a server that fails fails the request (the limiter then lets it through)', async () => {
    const one = instance();
    server.failing = true;
    await assert.rejects(incr(one, 'read:a', 1000), /Redis is down/);
    await assert.rejects(read(one, 'read:a', 1000), /Redis is down/);
  });

  test('keys unused for FRESH_MS are forgotten, and the timer stops with them', async () => {
    const one = instance();
    await incr(one, 'read:a', 1000);
    await incr(one, 'read:a', 1000);
    await pass(SYNC_MS);
    assert.equal(server.countOf('read:a'), 2);
    await pass(FRESH_MS + SYNC_MS);
    const calls = server.calls;
    await pass(10 * SYNC_MS);
    assert.equal(server.calls, calls);
    // Forgotten: the next request asks.
    assert.equal(await incr(one, 'read:a', 1000), 3);
    assert.equal(server.calls, calls + 1);
  });
});

describe('the counts\' breaker (failingFast)', () => {
  const RETRY_MS = 500;
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  test('after a failed question none is asked for a while, then one asks while the others fail at once; each change is heard once', async () => {
    const server = new CountingServer();
    const changes: boolean[] = [];
    const guarded = failingFast(server, RETRY_MS, (available) => void changes.push(available));
    assert.equal((await guarded.addAndRead('read:a', 1, WINDOW_MS)).count, 1);

    server.failing = true;
    await assert.rejects(guarded.addAndRead('read:a', 1, WINDOW_MS), /Redis is down/);
    await assert.rejects(guarded.read('read:a'), /unavailable/);
    await pass(RETRY_MS - 1);
    await assert.rejects(guarded.read('read:a'), /unavailable/);
    assert.equal(server.calls, 2);

    // Past the wait one question asks (and fails again); the wait starts over.
    await pass(1);
    await assert.rejects(guarded.read('read:a'), /Redis is down/);
    await assert.rejects(guarded.read('read:a'), /unavailable/);
    assert.equal(server.calls, 3);

    // Redis is back: while the one question is on its way the others still fail at once.
    server.failing = false;
    server.answerAfterMs = 10;
    await pass(RETRY_MS);
    const probe = guarded.read('read:a');
    await assert.rejects(guarded.addAndRead('read:a', 1, WINDOW_MS), /unavailable/);
    await pass(10);
    assert.equal((await probe).count, 1);
    server.answerAfterMs = 0;
    assert.equal((await guarded.addAndRead('read:a', 1, WINDOW_MS)).count, 2);
    assert.equal(server.calls, 5);
    assert.deepEqual(changes, [false, true]);
  });
});

if (process.env.TEST_REDIS_URL) {
  describe('shared counts on Redis, through the service', () => {
    /** A source address of its own per test, so counts left in Redis by earlier runs do not matter. */
    const source = () => `10.7.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}`;
    /**
     * Waits until the source's read count in Redis is `count`: each instance sends what it counted
     * within SYNC_MS of its timer firing, which a busy machine delays.
     */
    async function countReaches(from: string, count: number): Promise<void> {
      const redis = new Redis(process.env.TEST_REDIS_URL!);
      try {
        await eventually(async () => Number(await redis.get(`pds-rate-limit:read:${from}`)) === count, 50 * SYNC_MS, `the count in Redis at ${count}`, SYNC_MS / 4);
      } finally {
        await redis.quit();
      }
    }
    const get = (h: Harness, from: string) => h.request({
      method: 'GET', url: '/v1/campuses', remoteAddress: from, headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}` },
    });

    test('two instances far from a shared limit ask Redis per key and per SYNC_MS, not per request, and share their counts', async () => {
      const settings = { readLimitPerMin: 1000, redisUrl: process.env.TEST_REDIS_URL };
      const [one, two] = [await Harness.start('pglite', { demoStudents: 3, settings }), await Harness.start('pglite', { demoStudents: 3, settings })];
      const redis = new Redis(process.env.TEST_REDIS_URL!);
      const monitor = await redis.monitor();
      try {
        const from = source();
        // Every script run on this source's keys (its read count, its failed authentications); the
        // commands the scripts run inside show in MONITOR too, and are not questions.
        let asked = 0;
        monitor.on('monitor', (_time: string, args: string[], source: string) => {
          if (source !== 'lua' && args.some((arg) => arg.endsWith(from))) asked += 1;
        });
        const started = Date.now();
        // Each instance's first request asks; then ten bursts of ten requests at each.
        for (const h of [one, two]) assert.equal((await get(h, from)).status, 200);
        for (let burst = 0; burst < 10; burst++) {
          const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 === 0 ? one : two, from)));
          assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
        }
        const elapsed = Date.now() - started;
        // Each instance: its first question of each key, a read refreshed every FRESH_MS, a sync every SYNC_MS.
        const most = 2 * (2 + Math.ceil(elapsed / FRESH_MS) + Math.ceil(elapsed / SYNC_MS) + 1);
        // @fastify/rate-limit's own Redis store asked twice a request: 404 questions.
        assert.ok(asked <= most, `${asked} questions in ${elapsed} ms for 202 requests (at most ${most})`);
        await countReaches(from, 202);
        // Once its count is older than FRESH_MS, one asks again; the answer knows both instances' requests.
        await new Promise((resolve) => setTimeout(resolve, FRESH_MS + SYNC_MS));
        assert.equal((await get(one, from)).headers['ratelimit-remaining'], String(1000 - 203));
      } finally {
        monitor.disconnect();
        redis.disconnect();
        await one.close();
        await two.close();
      }
    });

    test('an instance sends what it counted within SYNC_MS, and past half a limit every request asks: the next instance refuses the request over it', async () => {
      const settings = { readLimitPerMin: 6, redisUrl: process.env.TEST_REDIS_URL };
      const [one, two] = [await Harness.start('pglite', { demoStudents: 3, settings }), await Harness.start('pglite', { demoStudents: 3, settings })];
      try {
        const from = source();
        // One asks for the first and counts the next two itself (three of six is half).
        for (let i = 0; i < 3; i++) assert.equal((await get(one, from)).status, 200);
        await countReaches(from, 3);
        const statuses: number[] = [];
        for (let i = 0; i < 4; i++) statuses.push((await get(two, from)).status);
        assert.deepEqual(statuses, [200, 200, 200, 429]);
        assert.equal((await get(one, from)).status, 429);
      } finally {
        await one.close();
        await two.close();
      }
    });
  });
}
