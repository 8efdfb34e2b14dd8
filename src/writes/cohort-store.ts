/** The database side of a cohort batch: state in three queries, changes in two statements. */
import { arrayLiteral } from '../db/array-literal.ts';
import type { Queryable } from '../db/store.ts';
import type { CohortBatchState, CohortDecision, CohortRecord, CohortRow } from './cohorts.ts';

export async function loadCohortState(tx: Queryable, universityId: string, rows: readonly CohortRow[]): Promise<CohortBatchState> {
  const cohorts = await tx.query<CohortRecord>(
    `select c.id, c.name, c.display_name, c.program, c.degree, c.start_date::text, c.end_date::text, c.intake_year,
            c.intake_term, cp.name as campus_name, c.study_mode, c.resume_template_names
     from cohorts c left join campuses cp on cp.id = c.campus_id
     where c.university_id = $1 and c.name = any($2::text[]) order by c.id`,
    [universityId, arrayLiteral([...new Set(rows.map((r) => r.name))])]);
  const campuses = await tx.query<{ id: string; name: string }>(
    'select id, name from campuses where university_id = $1 order by created_at desc, id desc', [universityId]);
  const templates = await tx.query<{ name: string }>('select name from resume_templates where university_id = $1', [universityId]);
  const cohortsByName = new Map<string, CohortRecord[]>();
  for (const c of cohorts) cohortsByName.set(c.name, [...(cohortsByName.get(c.name) ?? []), c]);
  return {
    cohortsByName,
    campusIdsByName: new Map(campuses.map((c) => [c.name, c.id])),
    templateNames: new Set(templates.map((t) => t.name)),
  };
}

/** Writes each touched cohort once, with its final values (a batch may create then update one). */
export async function applyCohortChanges(tx: Queryable, universityId: string, state: CohortBatchState, decisions: readonly CohortDecision[]): Promise<void> {
  const finalById = new Map<string, CohortRecord>();
  const createdIds = new Set<string>();
  for (const d of decisions) {
    if (d.kind === 'create') createdIds.add(d.record.id);
    if (d.kind === 'create' || d.kind === 'update') finalById.set(d.record.id, d.record);
  }
  const params = (records: CohortRecord[]) => [
    universityId,
    arrayLiteral(records.map((r) => r.id)),
    arrayLiteral(records.map((r) => r.name)),
    arrayLiteral(records.map((r) => r.display_name)),
    arrayLiteral(records.map((r) => r.program)),
    arrayLiteral(records.map((r) => r.degree)),
    arrayLiteral(records.map((r) => r.start_date)),
    arrayLiteral(records.map((r) => r.end_date)),
    arrayLiteral(records.map((r) => String(r.intake_year))),
    arrayLiteral(records.map((r) => r.intake_term)),
    arrayLiteral(records.map((r) => (r.campus_name === null ? null : state.campusIdsByName.get(r.campus_name) ?? null))),
    arrayLiteral(records.map((r) => r.study_mode)),
    // Each cohort's template list travels as one array literal, unnested back into text[].
    arrayLiteral(records.map((r) => arrayLiteral(r.resume_template_names))),
  ];
  const rowsOf = `unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::date[], $8::date[], $9::integer[],
      $10::text[], $11::uuid[], $12::text[], $13::text[])
    as u(id, name, display_name, program, degree, start_date, end_date, intake_year, intake_term, campus_id, study_mode, templates)`;
  const creates = [...finalById.values()].filter((r) => createdIds.has(r.id));
  if (creates.length > 0) {
    await tx.query(
      `insert into cohorts (id, university_id, name, display_name, program, degree, start_date, end_date, intake_year,
         intake_term, campus_id, study_mode, resume_template_names)
       select u.id, $1, u.name, u.display_name, u.program, u.degree, u.start_date, u.end_date, u.intake_year, u.intake_term,
         u.campus_id, u.study_mode, u.templates::text[] from ${rowsOf}`,
      params(creates));
  }
  const updates = [...finalById.values()].filter((r) => !createdIds.has(r.id));
  if (updates.length > 0) {
    await tx.query(
      `update cohorts c set display_name = u.display_name, program = u.program, degree = u.degree, start_date = u.start_date,
         end_date = u.end_date, intake_year = u.intake_year, intake_term = u.intake_term, campus_id = u.campus_id,
         study_mode = u.study_mode, resume_template_names = u.templates::text[], updated_at = now()
       from ${rowsOf} where c.id = u.id and c.university_id = $1`,
      params(updates));
  }
}
