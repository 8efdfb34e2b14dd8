/**
 * Fastify's own client errors that have no entry of their own in src/http/errors.ts still leave
 * as a 4xx with the documented body, never as a 500 INTERNAL.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Database } from '../src/db/database.ts';
import { buildApp } from '../src/http/app.ts';
import { type TestStore, openTestStore } from './support/harness.ts';

let testStore: TestStore;
let app: FastifyInstance;
before(async () => {
  testStore = await openTestStore('pglite');
  app = await buildApp({
    adminKey: undefined, redisUrl: undefined, readLimitPerMin: 100, writeLimitPerMin: 100, plannedCounts: true, logLevel: 'silent',
  }, new Database(testStore.store, 1_000));
  // A body stream that fails while it is read, as a connection that breaks off does: Fastify
  // passes the stream's error on with statusCode 400 and no code of its own.
  app.post('/broken-body', {
    preParsing: async () => new Readable({
      read() {
        this.destroy(new Error('the body stream broke off'));
      },
    }),
  }, async () => ({ read: true }));
  await app.ready();
});
after(async () => {
  await app.close();
  await testStore.drop();
});

test('a 4xx Fastify error with no entry of its own is INVALID_BODY, not INTERNAL', async () => {
  const response = await app.inject({ method: 'POST', url: '/broken-body', payload: { any: 'thing' } });
  assert.equal(response.statusCode, 400);
  const body = response.json();
  assert.equal(body.code, 'INVALID_BODY');
  assert.match(body.message, /the body stream broke off/);
  assert.deepEqual(Object.keys(body), ['code', 'message', 'details', 'hint']);
});
