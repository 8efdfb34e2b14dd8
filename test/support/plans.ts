/** The plan tests' large universities, and their reading of PostgreSQL's `EXPLAIN (ANALYZE, FORMAT JSON)` plans. */
import assert from 'node:assert/strict';
import type { Harness } from './harness.ts';

export interface AnalysedNode {
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: AnalysedNode[];
}

/**
 * A new university named `name` with `count` students, inserted in bulk: each with a student
 * number, one of 1,024 surnames and one of 128 first names, in no order of id. Returns its id.
 */
export async function enrolStudents(h: Harness, name: string, count: number): Promise<string> {
  const id = (await h.admin('POST', '/universities', { name })).json.id as string;
  await h.sql(`insert into accounts (university_id, kind, id, email)
    select $1, 'student', gen_random_uuid(), 'student' || g || '@' || $2 from generate_series(1, ${count}) g`, [id, `${id}.example.edu`]);
  await h.sql(`insert into students (university_id, id, email, first_name, last_name, external_id)
    select university_id, id, email, 'First' || (hashtext(email) & 127), 'Last' || (hashtext(email || 'x') & 1023), 'X-' || email
    from accounts where university_id = $1`, [id]);
  return id;
}

/** Every node of a plan that scans the students table or one of its indexes. */
function studentScans(node: AnalysedNode): AnalysedNode[] {
  const own = node['Relation Name'] === 'students' || node['Index Name']?.startsWith('students_') ? [node] : [];
  return [...own, ...(node.Plans ?? []).flatMap(studentScans)];
}

/** The students rows a scan node visited: those it passed on and those its filters removed. */
const visited = (node: AnalysedNode) =>
  (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'];

/** The plan scans students, and none of its scans visits more than `most` of the `of` there are. */
export function assertStudentScansVisitAtMost(plan: AnalysedNode, most: number, of: number): void {
  const scans = studentScans(plan);
  assert.ok(scans.length > 0);
  for (const scan of scans) assert.ok(visited(scan) <= most, `${scan['Index Name'] ?? scan['Relation Name']} visited ${visited(scan)} of ${of} students`);
}
