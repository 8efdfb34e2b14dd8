/**
 * A statement sent ahead in a pipeline (the role and scope settings, a batch's university lock)
 * that fails is what the caller hears about, not the "transaction aborted" of the statements
 * after it; and a select cast names a type only from the allowed list, never an object property.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { Harness, backends } from './support/harness.ts';

if (process.env.TEST_DATABASE_URL) {
  describe('a batch whose university lock wait outlasts the statement timeout', () => {
    let h: Harness;
    before(async () => {
      h = await Harness.start('postgres', { demoStudents: 3, statementTimeoutMs: 300 });
    });
    after(() => h.close());

    test('answers 503 QUERY_TIMEOUT with Retry-After, not a 500', async () => {
      const university = h.demo!.universities[0];
      const holder = postgres(h.testStore.url!, { max: 1, onnotice: () => {} });
      const held = await holder.reserve();
      try {
        // Holds the university's lock row (src/db/locks.ts) in a transaction left open.
        await held.unsafe('begin');
        await held.unsafe('update tenants set university_id = university_id where university_id = $1', [university.id]);
        const res = await h.request({
          method: 'PUT', url: '/v1/students', payload: { students: [{ email: 'wait@example.edu', first_name: 'W', last_name: 'L', cohort_name: 'none', is_alumni: false }] },
          headers: { authorization: `Bearer ${university.write_token}`, 'content-type': 'application/json' },
        });
        assert.equal(res.status, 503, res.body);
        assert.equal(res.json.code, 'QUERY_TIMEOUT');
        assert.equal(res.headers['retry-after'], '1');
      } finally {
        await held.unsafe('rollback');
        held.release();
        await holder.end();
      }
    });
  });
}

for (const backend of backends()) {
  describe(`select casts on ${backend}`, () => {
    let h: Harness;
    before(async () => {
      h = await Harness.start(backend, { demoStudents: 3 });
    });
    after(() => h.close());

    test('a cast named like an object property is an unknown type, 400 42704', async () => {
      for (const cast of ['constructor', '__proto__', 'toString']) {
        const res = await h.get(`/v1/campuses?select=id::${cast}`, h.demo!.universities[0].read_token);
        assert.equal(res.status, 400, cast);
        assert.equal(res.json.code, '42704', cast);
      }
    });
  });
}
