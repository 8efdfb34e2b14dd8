/**
 * The scratch databases of tests and benchmarks (tools/scratch-database.ts): a name is held by
 * one run at a time, so a second benchmark on the same server cannot drop the first's database.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import postgres from 'postgres';
import { createScratchDatabase } from '../tools/scratch-database.ts';

if (process.env.TEST_DATABASE_URL) {
  describe('scratch databases on a PostgreSQL server', () => {
    const server = process.env.TEST_DATABASE_URL!;

    test('a second run given a held name is refused and leaves the first its database; once dropped, the name is free', async () => {
      const name = `pds_test_held_${randomBytes(4).toString('hex')}`;
      const first = await createScratchDatabase(server, { name });
      try {
        const second = await createScratchDatabase(server, { name }).catch((error: Error) => error);
        // Dropped when it was made, so that the failing test ends rather than holding a connection.
        if (!(second instanceof Error)) await second.drop();
        assert.equal(second instanceof Error ? second.message : 'a second database', `Another run is using the database ${name} on ${new URL(server).host}: wait for it to end.`);
        const sql = postgres(first.url, { max: 1, onnotice: () => {} });
        try {
          await sql`create table kept (id int)`;
          assert.deepEqual([...await sql`select count(*)::int as n from kept`], [{ n: 0 }]);
        } finally {
          await sql.end();
        }
      } finally {
        await first.drop();
      }
      const again = await createScratchDatabase(server, { name });
      await again.drop();
    });
  });
}

// Seen in a full run: two suites setting up their databases at once on Citus, one failed adding
// the workers ("tuple concurrently updated" as both copied the roles to a worker).
if (process.env.TEST_CITUS_URL) {
  test('databases set up at once on a Citus cluster all come up', async () => {
    for (let round = 0; round < 3; round++) {
      const made = await Promise.allSettled([1, 2, 3].map(() => createScratchDatabase(process.env.TEST_CITUS_URL!)));
      await Promise.all(made.map((m) => (m.status === 'fulfilled' ? m.value.drop() : undefined)));
      assert.deepEqual(made.map((m) => (m.status === 'fulfilled' ? 'up' : String(m.reason))), ['up', 'up', 'up']);
    }
  });
}
