/** The database side of a cohort batch: state in three queries (one pipeline), changes in two statements. */
import { arrayLiteral } from '../db/array-literal.ts';
import type { ChangeSeq } from '../db/locks.ts';
import type { Queryable } from '../db/store.ts';
import { type ValuesColumn, valuesList } from '../db/values.ts';
import type { CohortBatchState, CohortDecision, CohortRecord, CohortRow } from './cohort-rules.ts';

export async function loadCohortState(tx: Queryable, universityId: string, rows: readonly CohortRow[]): Promise<CohortBatchState> {
  // Three reads, one pipeline.
  const [cohorts, campuses, templates] = await Promise.all([
    tx.query<CohortRecord>(
      `select c.id, c.name, c.display_name, c.program, c.degree, c.start_date::text, c.end_date::text, c.intake_year,
              c.intake_term, cp.name as campus_name, c.study_mode, c.resume_template_names
       from cohorts c left join campuses cp on cp.university_id = c.university_id and cp.id = c.campus_id
       where c.university_id = $1 and c.name = any($2::text[]) order by c.id`,
      [universityId, arrayLiteral([...new Set(rows.map((r) => r.name))])]),
    tx.query<{ id: string; name: string }>('select id, name from campuses where university_id = $1', [universityId]),
    tx.query<{ name: string }>('select name from resume_templates where university_id = $1', [universityId]),
  ]);
  const cohortsByName = new Map<string, CohortRecord[]>();
  for (const c of cohorts) cohortsByName.set(c.name, [...(cohortsByName.get(c.name) ?? []), c]);
  return {
    cohortsByName,
    campusIdsByName: new Map(campuses.map((c) => [c.name, c.id])),
    templateNames: new Set(templates.map((t) => t.name)),
  };
}

/** The columns of a cohort write; the campus travels as its id. */
const cohortColumns = (state: CohortBatchState): ValuesColumn<CohortRecord>[] => [
  { name: 'id', type: 'uuid', value: (r) => r.id },
  { name: 'name', type: 'text', value: (r) => r.name },
  { name: 'display_name', type: 'text', value: (r) => r.display_name },
  { name: 'program', type: 'text', value: (r) => r.program },
  { name: 'degree', type: 'text', value: (r) => r.degree },
  { name: 'start_date', type: 'date', value: (r) => r.start_date },
  { name: 'end_date', type: 'date', value: (r) => r.end_date },
  { name: 'intake_year', type: 'integer', value: (r) => r.intake_year },
  { name: 'intake_term', type: 'text', value: (r) => r.intake_term },
  { name: 'campus_id', type: 'uuid', value: (r) => (r.campus_name === null ? null : state.campusIdsByName.get(r.campus_name) ?? null) },
  { name: 'study_mode', type: 'text', value: (r) => r.study_mode },
  { name: 'resume_template_names', type: 'text[]', value: (r) => arrayLiteral(r.resume_template_names) },
];

/** The columns an update leaves as they are: the key, and the name, frozen once the cohort exists. */
const UPDATE_KEEPS: ReadonlySet<string> = new Set(['id', 'name']);

/**
 * Writes each touched cohort once, with its final values (a batch may create then update one),
 * stamped with the transaction's change number (src/db/locks.ts).
 */
export async function applyCohortChanges(
  tx: Queryable, universityId: string, changeSeq: ChangeSeq, state: CohortBatchState, decisions: readonly CohortDecision[],
): Promise<void> {
  const finalById = new Map<string, CohortRecord>();
  const createdIds = new Set<string>();
  for (const d of decisions) {
    if (d.kind === 'create') createdIds.add(d.record.id);
    if (d.kind === 'create' || d.kind === 'update') finalById.set(d.record.id, d.record);
  }
  const columns = cohortColumns(state);
  const statements: [string, (string | null)[]][] = [];
  const creates = [...finalById.values()].filter((r) => createdIds.has(r.id));
  if (creates.length > 0) {
    const list = valuesList(columns, creates, 3, ['$1::uuid', '$2::bigint', '$2::bigint']);
    statements.push([`insert into cohorts (university_id, change_seq, created_seq, ${list.columns}) values ${list.rows}`,
      [universityId, changeSeq, ...list.params]]);
  }
  const updates = [...finalById.values()].filter((r) => !createdIds.has(r.id));
  if (updates.length > 0) {
    const list = valuesList(columns, updates, 3);
    const assignments = columns.filter(({ name }) => !UPDATE_KEEPS.has(name)).map(({ name }) => `${name} = u.${name}`);
    statements.push([
      `update cohorts c set ${assignments.join(', ')}, updated_at = now(), change_seq = $2::bigint
       from (values ${list.rows}) as u(${list.columns}) where c.id = u.id and c.university_id = $1`,
      [universityId, changeSeq, ...list.params]]);
  }
  // The two touch different cohorts: one pipeline.
  await Promise.all(statements.map(([text, params]) => tx.query(text, params)));
}
