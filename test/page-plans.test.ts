/**
 * How PostgreSQL plans a partner's page under the partner's role and scope, on analysed
 * statistics: a university's page ordered by name reads its first entries of the name index in
 * order, not every student of the university (src/db/migrations/010_student_name_order.sql).
 * Runs when TEST_DATABASE_URL is set.
 */
import { after, before, describe, test } from 'node:test';
import { planRead } from '../src/query/plan.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { buildPageStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { Harness, backends } from './support/harness.ts';
import { type AnalysedNode, assertStudentScansVisitAtMost, enrolStudents } from './support/plans.ts';

if (backends().includes('postgres')) {
  describe('page statements on PostgreSQL', () => {
    let h: Harness;
    let university: string;
    const STUDENTS = 30_000;
    const LIMIT = 100;

    before(async () => {
      h = await Harness.start('postgres');
      university = await enrolStudents(h, 'Largeville University', STUDENTS);
      await h.store.exec('analyze');
    });
    after(() => h.close());

    for (const order of ['last_name,first_name', 'last_name']) {
      test(`one university's page ordered by ${order} visits its first ${LIMIT} students by name, not all ${STUDENTS}`, async () => {
        const plan = planRead(resourcesByName.get('students')!, parseReadRequest({ queryString: `select=id,email,first_name,last_name&order=${order}&limit=${LIMIT}`, method: 'GET' }));
        const statement = buildPageStatement(plan, [university], { exactCount: false, body: true });
        const [{ 'QUERY PLAN': [explained] }] = await h.db.asPartner({ universityIds: [university] }, (tx) =>
          tx.query<{ 'QUERY PLAN': [{ Plan: AnalysedNode }] }>(`explain (analyze, format json) ${statement.text}`, statement.params));
        // Ties on the last name are broken by first name and id within its entries: a few more than the page.
        assertStudentScansVisitAtMost(explained.Plan, 2 * LIMIT, STUDENTS);
      });
    }
  });
}
