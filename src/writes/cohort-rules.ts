/**
 * Cohort batch rules (docs/decisions.md, "Cohort writes") as pure functions, the fields read off
 * the cohort's write shape. Rows are decided in request order against a state that carries
 * earlier rows' effects, so a later row naming a cohort an earlier row created sees it.
 */
import { datesInOrder, unknownTemplates } from '../domain/cohort-checks.ts';
import { textProblem } from '../resources/text.ts';
import { COHORT_SHAPE, type CohortFieldValues, fieldNames } from '../resources/write-shapes.ts';
import { type Rejection, type RowStatus, STATUS_OF_DECISION, type WriteMode, echoedKey, reject } from './batch.ts';
import { NOT_AN_OBJECT, asObject, createFieldsRequired, firstTextProblem, isBlank, kindProblem, missingOnCreate } from './field-checks.ts';
import type { CohortRowCode } from './row-codes.ts';

export type CohortRejection = Rejection<CohortRowCode>;

/** The fields a cohort record holds; every other sent key is reported in dropped_fields. */
export const COHORT_FIELDS: ReadonlySet<string> = new Set(fieldNames(COHORT_SHAPE));

const INTAKE_YEARS = COHORT_SHAPE.fields.intake_year.range;

/** A cohort's fields besides its name; a list cleared with null holds no templates. */
export type CohortFields = Omit<CohortFieldValues, 'name' | 'resume_template_names'> & { resume_template_names: string[] };

/** A validated row: present fields only; null clears an optional field. */
export interface CohortRow {
  readonly index: number;
  /** The name as sent, which the row's result carries, and trimmed, as it is matched and stored. */
  readonly sentName: string;
  readonly name: string;
  readonly fields: Partial<CohortFields>;
  /** The fields a create needs that the row leaves out: a PUT row missing any may update, not create. */
  readonly missingOnCreate: readonly string[];
}

export type ValidatedCohortRow = { ok: CohortRow } | { rejected: CohortRejection; name: string | null };

/** Kinds, blanks and the intake year, field by field in shape order: the first problem found. */
function fieldProblem(row: Readonly<Record<string, unknown>>): string | null {
  for (const name of fieldNames(COHORT_SHAPE)) {
    if (name === COHORT_SHAPE.key) continue;
    const value = row[name];
    const problem = kindProblem(name, COHORT_SHAPE.fields[name], value);
    if (problem) return problem;
    if (typeof value === 'string' && isBlank(value)) return `${name} must not be blank.`;
    const blankEntry = Array.isArray(value) ? value.findIndex((entry) => typeof entry === 'string' && isBlank(entry)) : -1;
    if (blankEntry >= 0) return `${name}[${blankEntry}] must not be blank.`;
  }
  const year = row.intake_year;
  if (typeof year === 'number' && (year < INTAKE_YEARS.min || year > INTAKE_YEARS.max)) {
    return `intake_year must be a whole year from ${INTAKE_YEARS.min} to ${INTAKE_YEARS.max}.`;
  }
  return firstTextProblem(COHORT_SHAPE, row);
}

/** The sent fields besides the name, strings trimmed; a list's entries trimmed and each kept once; a null list becomes the empty list. */
function sentFields(row: Readonly<Record<string, unknown>>): Partial<CohortFields> {
  const fields: Record<string, unknown> = {};
  for (const name of fieldNames(COHORT_SHAPE)) {
    const value = row[name];
    if (name === COHORT_SHAPE.key || value === undefined) continue;
    if (name === 'resume_template_names' && value === null) fields[name] = [];
    else if (Array.isArray(value)) fields[name] = [...new Set(value.map((entry: string) => entry.trim()))];
    else fields[name] = typeof value === 'string' ? value.trim() : value;
  }
  return fields as Partial<CohortFields>;
}

export function validateCohortRow(raw: unknown, index: number, mode: WriteMode): ValidatedCohortRow {
  const row = asObject(raw);
  if (row === null) return { rejected: reject('INVALID_FIELD', NOT_AN_OBJECT), name: null };
  const name = typeof row.name === 'string' ? row.name : null;
  const fail = (code: CohortRowCode, message: string): ValidatedCohortRow => ({ rejected: reject(code, message), name });
  const maxName = COHORT_SHAPE.fields.name.maxLength;
  // The name is a field a create needs and the key of every row: absent, it is missing; null or
  // not a string, a field of the wrong kind (docs/decisions.md, "Cohort writes").
  if (row.name === undefined) return fail('MISSING_FIELD', 'name is required: it is the cohort\'s key.');
  if (name === null) return fail('INVALID_FIELD', kindProblem('name', COHORT_SHAPE.fields.name, row.name)!);
  if (isBlank(name) || textProblem('name', name, maxName) !== null) {
    return fail('INVALID_NAME',
      `name is required: 1 to ${maxName} characters, not blank, without control characters or unpaired surrogates.`);
  }
  const problem = fieldProblem(row);
  if (problem) return fail('INVALID_FIELD', problem);
  const missing = mode === 'patch' ? [] : missingOnCreate(COHORT_SHAPE, row);
  // Else a row missing any creates no cohort (decideCohortRow).
  if (missing.length > 0 && createFieldsRequired(COHORT_SHAPE, mode)) return fail('MISSING_FIELD', missingMessage(missing));
  if (typeof row.start_date === 'string' && typeof row.end_date === 'string' && !datesInOrder(row.start_date, row.end_date)) {
    return fail('INVALID_DATE_RANGE', 'end_date must be after start_date.');
  }
  return { ok: { index, sentName: name, name: name.trim(), fields: sentFields(row), missingOnCreate: missing } };
}

const missingMessage = (missing: readonly string[]) => `Required to create a cohort: ${missing.join(', ')}.`;

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
  | { readonly kind: 'reject'; readonly row: CohortRow; readonly rejection: CohortRejection }
  | { readonly kind: 'create' | 'update' | 'unchanged'; readonly row: CohortRow; readonly record: CohortRecord };

const sameValues = (a: CohortFields, b: CohortFields) => (Object.keys(a) as (keyof CohortFields)[])
  .every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));

function fieldsOf(record: CohortRecord): CohortFields {
  const { id: _id, name: _name, ...fields } = record;
  return fields;
}

function decideCohortRow(row: CohortRow, state: CohortBatchState, mode: WriteMode, newId: () => string): CohortDecision {
  const rejected = (rejection: CohortRejection): CohortDecision => ({ kind: 'reject', row, rejection });
  const matches = state.cohortsByName.get(row.name) ?? [];
  if (matches.length > 1) return rejected(reject('NAME_AMBIGUOUS', `${matches.length} cohorts of your university share the name "${row.name}".`));
  const current = matches[0];
  if (current && mode === 'post') return rejected(reject('ALREADY_EXISTS', `A cohort named "${row.name}" exists already.`));
  if (!current && mode === 'patch') return rejected(reject('NOT_FOUND', `No cohort named "${row.name}" at your university.`));
  if (!current && row.missingOnCreate.length > 0) return rejected(reject('MISSING_FIELD', missingMessage(row.missingOnCreate)));

  const campus = row.fields.campus_name;
  if (campus !== undefined && campus !== null && !state.campusIdsByName.has(campus)) {
    return rejected(reject('CAMPUS_NOT_FOUND', `No campus named "${campus}"; see GET /v1/campuses.`));
  }
  if (!current) {
    const unknown = unknownTemplates(row.fields.resume_template_names, state.templateNames);
    if (unknown.length > 0) return rejected(reject('UNKNOWN_TEMPLATE', `Unknown résumé templates: ${unknown.join(', ')}.`));
    // Every field a create needs is present: a row missing any was rejected above.
    const record = {
      id: newId(), name: row.name, campus_name: null, study_mode: null, resume_template_names: [],
      ...row.fields,
    } as CohortRecord;
    return { kind: 'create', row, record };
  }
  const merged: CohortRecord = { ...current, ...row.fields };
  if (!datesInOrder(merged.start_date, merged.end_date)) {
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
  code?: CohortRowCode;
  message?: string;
}

export function cohortResult(decision: CohortDecision): CohortResult {
  const name = echoedKey(decision.row.sentName);
  if (decision.kind === 'reject') return { name, status: 'rejected', code: decision.rejection.code, message: decision.rejection.message };
  return { name, status: STATUS_OF_DECISION[decision.kind], id: decision.record.id };
}
