/**
 * PostgreSQL array literals: the writer the batch statements use, the reader the pattern guard
 * and the PostgreSQL store's result parsers use, and arrays read back through the real driver,
 * which no longer fetches array types when a session connects.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { arrayLiteral, parseArrayLiteral } from '../src/db/array-literal.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS, type Store, StoreUnavailableError } from '../src/db/store.ts';
import { type ScratchDatabase, createScratchDatabase } from '../tools/scratch-database.ts';

/** Values whose quotes, backslashes, commas, braces and NULL must stay data, two of a kind in one element too. */
const LITERAL_VALUES = ['plain', 'comma,inside', 'quote"inside', 'back\\slash', 'two "quotes" and \\ two \\ slashes', '{braces}', 'NULL', '', ' spaced ', null];

describe('parseArrayLiteral', () => {
  const cases: [string, (string | null)[] | null][] = [
    ['{}', []],
    ['{a}', ['a']],
    ['{a,"b,c",NULL}', ['a', 'b,c', null]],
    ['{"NULL"," x ", y z }', ['NULL', ' x ', 'y z']],
    ['{"a\\"b","c\\\\d",e\\,f}', ['a"b', 'c\\d', 'e,f']],
    ['{""}', ['']],
    ['[1:2]={a,b}', ['a', 'b']],
    ['{{a,b},{c,d}}', ['a', 'b', 'c', 'd']],
    ['plain', null],
  ];
  for (const [literal, elements] of cases) {
    test(`${literal} → ${JSON.stringify(elements)}`, () => assert.deepEqual(parseArrayLiteral(literal), elements));
  }

  test('reads back what arrayLiteral writes, whatever the values hold', () => {
    assert.deepEqual(parseArrayLiteral(arrayLiteral(LITERAL_VALUES)), LITERAL_VALUES);
  });
});

if (process.env.TEST_DATABASE_URL) {
  describe('arrays read through the PostgreSQL store', () => {
    let scratch: ScratchDatabase;
    let store: Store;
    before(async () => {
      scratch = await createScratchDatabase(process.env.TEST_DATABASE_URL!);
      store = openPostgresStore(scratch.url, 2, DEFAULT_STORE_TIMEOUTS);
    });
    after(async () => {
      await store.close();
      await scratch.drop();
    });

    test('text, uuid, integer and boolean arrays come back as arrays, NULL elements as null', async () => {
      const [row] = await store.query<Record<string, unknown>>(`select
        array['a', 'b,c', null, 'NULL'] as texts,
        array['6f1c0d5e-8a1b-4c2d-9e3f-0a1b2c3d4e5f']::uuid[] as uuids,
        array[1, null, 3]::int4[] as integers,
        array[true, false]::bool[] as booleans,
        '{}'::text[] as empty`);
      assert.deepEqual(row, {
        texts: ['a', 'b,c', null, 'NULL'],
        uuids: ['6f1c0d5e-8a1b-4c2d-9e3f-0a1b2c3d4e5f'],
        integers: [1, null, 3],
        booleans: [true, false],
        empty: [],
      });
    });

    test('PostgreSQL reads what arrayLiteral writes as the same values', async () => {
      const [row] = await store.query<{ back: (string | null)[] }>('select $1::text[] as back', [arrayLiteral(LITERAL_VALUES)]);
      assert.deepEqual(row.back, LITERAL_VALUES);
    });

    test('a session cut right after it connects fails its statement and leaves no unhandled rejection', async () => {
      // A proxy that forwards until the server's first ReadyForQuery ('Z', length 5, idle) and then
      // cuts both sides: the moment postgres.js used to start fetching array types unawaited.
      const readyForQuery = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
      const target = new URL(scratch.url);
      const proxy = net.createServer((client) => {
        const server = net.connect(Number(target.port), target.hostname);
        client.on('error', () => {}).pipe(server);
        server.on('error', () => {}).on('data', (chunk: Buffer) => {
          const at = chunk.indexOf(readyForQuery);
          if (at < 0) return void client.write(chunk);
          server.destroy();
          client.end(chunk.subarray(0, at + readyForQuery.length));
        });
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => void unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      const url = new URL(scratch.url);
      url.port = String((proxy.address() as net.AddressInfo).port);
      const cut = openPostgresStore(url.toString(), 1, DEFAULT_STORE_TIMEOUTS);
      try {
        for (let i = 0; i < 5; i++) await assert.rejects(cut.query('select 1'), (e: Error & { code?: string }) => e instanceof StoreUnavailableError);
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.deepEqual(unhandled, []);
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await cut.close();
        proxy.close();
      }
    });
  });
}
