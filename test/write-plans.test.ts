/**
 * How PostgreSQL plans a batch's state read under the partner's role and scope, on analysed
 * statistics: it reads the students the batch names, by their keys, not every student of the
 * university (src/db/migrations/009_one_university_role.sql). Runs when TEST_DATABASE_URL is set.
 */
import { after, before, describe, test } from 'node:test';
import { arrayLiteral } from '../src/db/array-literal.ts';
import { BATCH_PLANNING } from '../src/db/locks.ts';
import { STUDENT_STATE_READ } from '../src/writes/student-store.ts';
import { Harness, backends } from './support/harness.ts';
import { type AnalysedNode, assertStudentScansVisitAtMost, enrolStudents } from './support/plans.ts';

if (backends().includes('postgres')) {
  describe('batch statements on PostgreSQL', () => {
    let h: Harness;
    let university: string;
    /**
     * A large university among others, and a batch naming 100 of its students: large enough that
     * lookups by key cost less than a scan of the university's narrow rows (the 500 rows of a full
     * batch reach that point at a larger university or wider rows: the demo's 35,000).
     */
    const STUDENTS = 30_000;

    before(async () => {
      h = await Harness.start('postgres');
      university = await enrolStudents(h, 'Largeville University', STUDENTS);
      await enrolStudents(h, 'Otherville University', STUDENTS);
      await h.store.exec('analyze');
    });
    after(() => h.close());

    test('the state read of a batch visits the students it names, not every student of the university', async () => {
      const named = await h.sql<{ email: string; external_id: string | null }>(
        'select email, external_id from students where university_id = $1 order by id limit 100', [university]);
      const [{ 'QUERY PLAN': [plan] }] = await h.db.asUniversity(university, async (tx) => {
        await tx.query(BATCH_PLANNING);
        return tx.query<{ 'QUERY PLAN': [{ Plan: AnalysedNode }] }>(`explain (analyze, format json) ${STUDENT_STATE_READ}`, [
          university, arrayLiteral(named.map((s) => s.email)), arrayLiteral(named.flatMap((s) => (s.external_id ? [s.external_id] : []))),
        ]);
      });
      // Read by key, a scan visits a few hundred students (each named by address and by number).
      assertStudentScansVisitAtMost(plan.Plan, 4 * named.length, STUDENTS);
    });
  });
}
