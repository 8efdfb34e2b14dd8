/** Reading PostgreSQL's `EXPLAIN (ANALYZE, FORMAT JSON)` plans in the plan tests. */

export interface AnalysedNode {
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: AnalysedNode[];
}

/** Every node of a plan that scans the students table or one of its indexes. */
export function studentScans(node: AnalysedNode): AnalysedNode[] {
  const own = node['Relation Name'] === 'students' || node['Index Name']?.startsWith('students_') ? [node] : [];
  return [...own, ...(node.Plans ?? []).flatMap(studentScans)];
}

/** The students rows a scan node visited: those it passed on and those its filters removed. */
export const visited = (node: AnalysedNode) =>
  (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'];
