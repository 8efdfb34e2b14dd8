/**
 * How PostgreSQL plans a partner's page under the partner's role and scope, on analysed
 * statistics: a university's page ordered by name reads its first entries of the name index in
 * order, not every student of the university (src/db/migrations/010_student_name_order.sql).
 * Runs when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { planRead } from '../src/query/plan.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { Harness, backends } from './support/harness.ts';
import { type AnalysedNode, studentScans, visited } from './support/plans.ts';

if (backends().includes('postgres')) {
  describe('page statements on PostgreSQL', () => {
    let h: Harness;
    let university: string;
    const STUDENTS = 30_000;
    const LIMIT = 100;

    before(async () => {
      h = await Harness.start('postgres');
      university = (await h.admin('POST', '/universities', { name: 'Largeville University' })).json.id as string;
      await h.sql(`insert into accounts (university_id, kind, id, email)
        select $1, 'student', gen_random_uuid(), 'student' || g || '@largeville.example.edu' from generate_series(1, ${STUDENTS}) g`, [university]);
      // A thousand surnames and a hundred first names, in no order of id.
      await h.sql(`insert into students (university_id, id, email, first_name, last_name)
        select university_id, id, email, 'First' || (hashtext(email) & 127), 'Last' || (hashtext(email || 'x') & 1023)
        from accounts where university_id = $1`, [university]);
      await h.store.exec('analyze');
    });
    after(() => h.close());

    for (const order of ['last_name,first_name', 'last_name']) {
      test(`one university's page ordered by ${order} visits its first ${LIMIT} students by name, not all ${STUDENTS}`, async () => {
        const plan = planRead(resourcesByName.get('students')!, parseReadRequest({ queryString: `select=id,email,first_name,last_name&order=${order}&limit=${LIMIT}`, method: 'GET' }));
        const statement = buildPageStatement(plan, [university], { exactCount: false, body: true });
        const [{ 'QUERY PLAN': [explained] }] = await h.db.asPartner({ universityIds: [university] }, (tx) =>
          tx.query<{ 'QUERY PLAN': [{ Plan: AnalysedNode }] }>(`explain (analyze, format json) ${statement.text}`, statement.params));
        const scans = studentScans(explained.Plan);
        assert.ok(scans.length > 0);
        // Ties on the last name are broken by first name and id within its entries: a few more than the page.
        for (const scan of scans) assert.ok(visited(scan) <= 2 * LIMIT, `${scan['Index Name'] ?? scan['Relation Name']} visited ${visited(scan)} of ${STUDENTS} students`);
      });
    }
  });
}
