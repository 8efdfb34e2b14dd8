/**
 * Cohort batch rules (spec 'Cohort (write shape)'; decisions D5) as pure functions. Rows are
 * decided in request order against a state that carries earlier rows' effects, so a later row
 * naming a cohort an earlier row created sees it.
 */
import { MAX_NAME_LENGTH, textProblem } from '../domain/text.ts';
import { type Rejection, type RowStatus, type WriteMode, isBlank, isIsoDate, reject } from './batch.ts';

export const INTAKE_TERMS = ['Fall', 'Winter', 'Spring', 'Summer'] as const;
export const STUDY_MODES = ['full_time', 'part_time', 'online', 'hybrid'] as const;
const REQUIRED_ON_CREATE = ['display_name', 'program', 'degree', 'start_date', 'end_date', 'intake_year', 'intake_term'] as const;

export const COHORT_FIELDS: ReadonlySet<string> = new Set([
  'name', ...REQUIRED_ON_CREATE, 'campus_name', 'study_mode', 'resume_template_names',
]);

/**
 * The longest value each string field takes, in characters; `resume_template_names` bounds
 * each entry. A violation of `name` is INVALID_NAME, of any other INVALID_FIELD.
 */
export const COHORT_TEXT_FIELDS = {
  name: MAX_NAME_LENGTH,
  display_name: MAX_NAME_LENGTH,
  program: MAX_NAME_LENGTH,
  degree: MAX_NAME_LENGTH,
  campus_name: MAX_NAME_LENGTH,
  resume_template_names: MAX_NAME_LENGTH,
} as const satisfies Record<string, number>;

/** A validated row: present fields only; null clears an optional field. */
export interface CohortRow {
  readonly index: number;
  readonly name: string;
  readonly fields: Partial<CohortFields>;
}

export interface CohortFields {
  display_name: string;
  program: string;
  degree: string;
  start_date: string;
  end_date: string;
  intake_year: number;
  intake_term: string;
  campus_name: string | null;
  study_mode: string | null;
  resume_template_names: string[];
}

export type ValidatedCohortRow = { ok: CohortRow } | { rejected: Rejection; name: string | null };

export function validateCohortRow(raw: unknown, index: number, mode: WriteMode): ValidatedCohortRow {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return { rejected: reject('INVALID_FIELD', 'Each row must be a JSON object.'), name: null };
  }
  const row = raw as Record<string, unknown>;
  const name = typeof row.name === 'string' ? row.name : null;
  const fail = (code: string, message: string): ValidatedCohortRow => ({ rejected: reject(code, message), name });
  if (name === null || isBlank(name) || textProblem('name', name, COHORT_TEXT_FIELDS.name) !== null) {
    return fail('INVALID_NAME', `name is required: 1 to ${COHORT_TEXT_FIELDS.name} characters, not blank, without control characters.`);
  }
  for (const field of ['display_name', 'program', 'degree'] as const) {
    const value = row[field];
    if (value !== undefined && (typeof value !== 'string' || isBlank(value))) return fail('INVALID_FIELD', `${field} must be a non-blank string.`);
  }
  for (const field of ['start_date', 'end_date'] as const) {
    if (row[field] !== undefined && !isIsoDate(row[field])) return fail('INVALID_FIELD', `${field} must be a date in YYYY-MM-DD form.`);
  }
  if (row.intake_year !== undefined && (!Number.isInteger(row.intake_year) || (row.intake_year as number) < 1900 || (row.intake_year as number) > 2200)) {
    return fail('INVALID_FIELD', 'intake_year must be a whole year.');
  }
  if (row.intake_term !== undefined && !(INTAKE_TERMS as readonly unknown[]).includes(row.intake_term)) {
    return fail('INVALID_FIELD', `intake_term must be one of ${INTAKE_TERMS.join(', ')}.`);
  }
  if (row.campus_name !== undefined && row.campus_name !== null && (typeof row.campus_name !== 'string' || isBlank(row.campus_name))) {
    return fail('INVALID_FIELD', 'campus_name must be a campus name or null.');
  }
  if (row.study_mode !== undefined && row.study_mode !== null && !(STUDY_MODES as readonly unknown[]).includes(row.study_mode)) {
    return fail('INVALID_FIELD', `study_mode must be one of ${STUDY_MODES.join(', ')}, or null.`);
  }
  const templates = row.resume_template_names;
  if (templates !== undefined && templates !== null && (!Array.isArray(templates) || templates.some((t) => typeof t !== 'string'))) {
    return fail('INVALID_FIELD', 'resume_template_names must be a list of strings.');
  }
  for (const [field, maxLength] of Object.entries(COHORT_TEXT_FIELDS)) {
    const value = row[field];
    const entries: [string, unknown][] = Array.isArray(value) ? value.map((v, i) => [`${field}[${i}]`, v]) : [[field, value]];
    for (const [label, entry] of entries) {
      const problem = typeof entry === 'string' ? textProblem(label, entry, maxLength) : null;
      if (problem) return fail('INVALID_FIELD', problem);
    }
  }
  if (mode !== 'patch') {
    const missing = REQUIRED_ON_CREATE.filter((f) => row[f] === undefined);
    if (missing.length > 0) return fail('MISSING_FIELD', `Required to create a cohort: ${missing.join(', ')}.`);
  }
  if (typeof row.start_date === 'string' && typeof row.end_date === 'string' && row.end_date <= row.start_date) {
    return fail('INVALID_DATE_RANGE', 'end_date must be after start_date.');
  }
  const fields: Partial<CohortFields> = {};
  for (const field of COHORT_FIELDS) {
    if (field === 'name' || row[field] === undefined) continue;
    const value = field === 'resume_template_names' && row[field] === null ? [] : row[field];
    (fields as Record<string, unknown>)[field] = typeof value === 'string' ? value.trim() : value;
  }
  return { ok: { index, name: name.trim(), fields } };
}

/** A cohort as stored, in write terms (the campus by name). */
export interface CohortRecord extends CohortFields {
  readonly id: string;
  readonly name: string;
}

export interface CohortBatchState {
  readonly cohortsByName: ReadonlyMap<string, readonly CohortRecord[]>;
  readonly campusIdsByName: ReadonlyMap<string, string>;
  readonly templateNames: ReadonlySet<string>;
}

export type CohortDecision =
  | { readonly kind: 'reject'; readonly row: CohortRow; readonly rejection: Rejection }
  | { readonly kind: 'create' | 'update' | 'unchanged'; readonly row: CohortRow; readonly record: CohortRecord };

const sameValues = (a: CohortFields, b: CohortFields) => (Object.keys(a) as (keyof CohortFields)[])
  .every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));

function fieldsOf(record: CohortRecord): CohortFields {
  const { id: _id, name: _name, ...fields } = record;
  return fields;
}

export function decideCohortRow(row: CohortRow, state: CohortBatchState, mode: WriteMode, newId: () => string): CohortDecision {
  const rejected = (rejection: Rejection): CohortDecision => ({ kind: 'reject', row, rejection });
  const matches = state.cohortsByName.get(row.name) ?? [];
  if (matches.length > 1) return rejected(reject('NAME_AMBIGUOUS', `${matches.length} cohorts of your university share the name "${row.name}".`));
  const current = matches[0];
  if (current && mode === 'post') return rejected(reject('ALREADY_EXISTS', `A cohort named "${row.name}" exists already.`));
  if (!current && mode === 'patch') return rejected(reject('NOT_FOUND', `No cohort named "${row.name}" at your university.`));

  const campus = row.fields.campus_name;
  if (campus !== undefined && campus !== null && !state.campusIdsByName.has(campus)) {
    return rejected(reject('CAMPUS_NOT_FOUND', `No campus named "${campus}"; see GET /v1/campuses.`));
  }
  if (!current) {
    const unknown = (row.fields.resume_template_names ?? []).filter((t) => !state.templateNames.has(t));
    if (unknown.length > 0) return rejected(reject('UNKNOWN_TEMPLATE', `Unknown résumé templates: ${unknown.join(', ')}.`));
    // Validation guarantees every required field is present on create.
    const record = {
      id: newId(), name: row.name, campus_name: null, study_mode: null, resume_template_names: [],
      ...row.fields,
    } as CohortRecord;
    return { kind: 'create', row, record };
  }
  const merged: CohortRecord = { ...current, ...row.fields };
  if (merged.end_date <= merged.start_date) {
    return rejected(reject('INVALID_DATE_RANGE', `end_date ${merged.end_date} would not be after start_date ${merged.start_date}.`));
  }
  if (sameValues(fieldsOf(merged), fieldsOf(current))) return { kind: 'unchanged', row, record: current };
  return { kind: 'update', row, record: merged };
}

export function decideCohortBatch(rows: readonly CohortRow[], state: CohortBatchState, mode: WriteMode, newId: () => string): CohortDecision[] {
  const cohortsByName = new Map(state.cohortsByName);
  return rows.map((row) => {
    const decision = decideCohortRow(row, { ...state, cohortsByName }, mode, newId);
    if (decision.kind === 'create' || decision.kind === 'update') cohortsByName.set(row.name, [decision.record]);
    return decision;
  });
}

export interface CohortResult {
  name: string | null;
  status: RowStatus;
  id?: string;
  code?: string;
  message?: string;
}

export function cohortResult(decision: CohortDecision): CohortResult {
  if (decision.kind === 'reject') return { name: decision.row.name, status: 'rejected', code: decision.rejection.code, message: decision.rejection.message };
  const status: RowStatus = decision.kind === 'create' ? 'created' : decision.kind === 'update' ? 'updated' : 'unchanged';
  return { name: decision.row.name, status, id: decision.record.id };
}
