/**
 * What the operator creates when onboarding a university (docs/decisions.md, "Operator API"). Each
 * record is inserted, then read back in its operator shape (src/domain/operator-records.ts): Citus
 * refuses functions of a column (the timestamp rendering) and subqueries in RETURNING. Constraint
 * violations surface as database errors the HTTP layer maps to 4xx.
 */
import { randomUUID } from 'node:crypto';
import { arrayLiteral } from '../db/array-literal.ts';
import { lockUniversity } from '../db/locks.ts';
import type { Queryable, Row } from '../db/store.ts';
import { apiError } from '../errors.ts';
import type { COHORT_SHAPE, CreateValues } from '../resources/write-shapes.ts';
import { datesInOrder, unknownTemplates } from './cohort-checks.ts';
import { claimAccountAddress, emailKey } from './email-register.ts';
import { type OperatorCollection, getRecord } from './operator-records.ts';

/** Runs an insert that returns the new record's `id`, and reads the record back. */
async function insertOne(tx: Queryable, collection: OperatorCollection, text: string, params: (string | null)[]): Promise<Row> {
  const [{ id }] = await tx.query<{ id: string }>(text, params);
  return (await getRecord(tx, collection, id))!;
}

/**
 * Names are stored trimmed, as partners' rows are read (docs/decisions.md, Cohort writes): a campus
 * or template stored with its spaces could never be named by a cohort row.
 */
export function createConsortium(tx: Queryable, input: { name: string }) {
  return insertOne(tx, 'consortia', 'insert into consortia (name) values ($1) returning id', [input.name.trim()]);
}

/**
 * A university; its name need not be unique (migration 008). The timezone must be a name in the
 * store's own time zone database, the one `at time zone` reads: Node's Intl.supportedValuesOf('timeZone') omits
 * valid names such as UTC and Asia/Kolkata (Node 20). PostgreSQL's POSIX-rule copies
 * (`posix/…`) are not IANA names and are refused.
 */
export async function createUniversity(tx: Queryable, input: { name: string; short_name?: string | null; consortium_id?: string | null; country?: string | null; timezone?: string | null }) {
  if (input.timezone != null) {
    const [known] = await tx.query(`select 1 from pg_timezone_names where name = $1 and name !~ '^(posix|right)/'`, [input.timezone]);
    if (!known) throw apiError('INVALID_BODY', `timezone "${input.timezone}" is not an IANA time zone name.`, 'Use a name such as Europe/London or America/Chicago.');
  }
  return insertOne(tx, 'universities',
    'insert into universities (name, short_name, consortium_id, country, timezone) values ($1, $2, $3, $4, $5) returning id',
    [input.name.trim(), input.short_name?.trim() ?? null, input.consortium_id ?? null, input.country ?? null, input.timezone ?? null]);
}

export function createCampus(tx: Queryable, input: { university_id: string; name: string; city?: string | null; country?: string | null }) {
  return insertOne(tx, 'campuses',
    'insert into campuses (university_id, name, city, country) values ($1, $2, $3, $4) returning id',
    [input.university_id, input.name.trim(), input.city ?? null, input.country ?? null]);
}

export function createResumeTemplate(tx: Queryable, input: { university_id: string; name: string }) {
  return insertOne(tx, 'resume-templates',
    'insert into resume_templates (university_id, name) values ($1, $2) returning id',
    [input.university_id, input.name.trim()]);
}

/** An account's kinds; mirrored by the CHECK on accounts in src/db/migrations/001_schema.sql and 004_sharding.sql. */
export type AccountKind = 'student' | 'staff' | 'self_serve';
/** The kinds the operator API creates: a student's account comes with the student, from a partner's batch. */
export const OPERATOR_ACCOUNT_KINDS = ['staff', 'self_serve'] as const satisfies readonly AccountKind[];

/**
 * Accounts that are not students: staff of a university, or self-serve users without one. An
 * account without a university is its own tenant (migration 004): its university_id is its id.
 */
export async function createAccount(tx: Queryable, input: { email: string; kind: (typeof OPERATOR_ACCOUNT_KINDS)[number]; university_id?: string | null }) {
  const email = emailKey(input.email);
  const universityId = input.university_id ?? null;
  if (universityId !== null) {
    const [known] = await tx.query('select 1 from universities where id = $1', [universityId]);
    if (!known) throw apiError('INVALID_REFERENCE', 'university_id', universityId);
  }
  if (!await claimAccountAddress(tx, email, input.kind, universityId)) throw apiError('EMAIL_TAKEN');
  const id = randomUUID();
  return insertOne(tx, 'accounts',
    'insert into accounts (id, email, kind, university_id) values ($1, $2, $3, coalesce($4::uuid, $1::uuid)) returning id',
    [id, email, input.kind, universityId]);
}

export type AppCohortInput = { university_id: string } & CreateValues<typeof COHORT_SHAPE>;

/**
 * The app's own cohort create: no name-uniqueness check, which is how duplicate names exist; its
 * dates, campus and templates are checked as a partner's create is, in that order, by the same
 * rules (src/writes/cohort-rules.ts). Its body's fields (kinds, no blank text, the intake year's
 * range) are checked before, by the schema read off the write shape (cohortCreateBody in
 * src/http/write-schemas.ts).
 * It takes the university's lock like every change to its cohorts, for the change number the
 * change feed orders it by (src/db/locks.ts). Answers the new cohort's id.
 */
export async function createCohortInApp(tx: Queryable, input: AppCohortInput): Promise<string> {
  if (!datesInOrder(input.start_date, input.end_date)) throw apiError('INVALID_DATE_RANGE', input.start_date, input.end_date);
  const changeSeq = await lockUniversity(tx, input.university_id);
  let campusId: string | null = null;
  if (input.campus_name) {
    const [campus] = await tx.query<{ id: string }>('select id from campuses where university_id = $1 and name = $2',
      [input.university_id, input.campus_name.trim()]);
    if (!campus) throw apiError('CAMPUS_NOT_FOUND', input.campus_name);
    campusId = campus.id;
  }
  // Trimmed and each kept once, as a partner's row's (src/writes/cohort-rules.ts).
  const templates = [...new Set((input.resume_template_names ?? []).map((template) => template.trim()))];
  if (templates.length > 0) {
    const known = await tx.query<{ name: string }>('select name from resume_templates where university_id = $1 and name = any($2::text[])',
      [input.university_id, arrayLiteral(templates)]);
    const unknown = unknownTemplates(templates, new Set(known.map((row) => row.name)));
    if (unknown.length > 0) throw apiError('UNKNOWN_TEMPLATE', unknown);
  }
  const [{ id }] = await tx.query<{ id: string }>(
    `insert into cohorts (university_id, name, display_name, program, degree, start_date, end_date, intake_year,
       intake_term, campus_id, study_mode, resume_template_names, change_seq, created_seq)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text[], $13::bigint, $13::bigint) returning id`,
    [input.university_id, input.name.trim(), input.display_name, input.program, input.degree, input.start_date, input.end_date,
      String(input.intake_year), input.intake_term, campusId, input.study_mode ?? null, arrayLiteral(templates), changeSeq]);
  return id;
}
