/**
 * The 14 readable resources (docs/decisions.md, "Resources and reads"): the single source of
 * truth for what a partner reads, their columns and types. The read planner, the OpenAPI
 * description and the read routes take every column from this registry; the writes' statements
 * (src/writes/, src/domain/) name the columns they write in their own SQL.
 */
import { INTAKE_TERMS, STUDY_MODES } from './write-shapes.ts';

/** A student's account status; mirrored by the CHECK on students in src/db/migrations/001_schema.sql. */
export const ACCOUNT_STATUSES = ['invited', 'claimed'] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];
/** Onboarding's statuses; mirrored by the CHECK on onboarding in src/db/migrations/001_schema.sql. */
const ONBOARDING_STATUSES = ['not_started', 'in_progress', 'completed'] as const;

export type ColumnType =
  | 'uuid' | 'text' | 'integer' | 'numeric' | 'boolean' | 'date' | 'timestamptz' | 'jsonb' | 'text[]' | 'uuid[]';

export interface Column {
  readonly name: string;
  readonly type: ColumnType;
  readonly nullable: boolean;
  /** Large values the guide tells callers to leave out with `select`. */
  readonly large?: boolean;
  readonly enum?: readonly string[];
  readonly description?: string;
  /** Computed by the resource's read view (Resource.relation); its table has no such column. */
  readonly derived?: boolean;
}

export interface Resource {
  readonly name: string;
  /** The relation reads come from: a table, or a security-invoker view adding derived columns. */
  readonly relation: string;
  /**
   * The table holding every column that is not derived: the relation itself, or the table under
   * its view. A read naming no derived column comes from it (ReadPlan.relation).
   */
  readonly table: string;
  readonly description: string;
  readonly columns: readonly Column[];
  readonly columnsByName: ReadonlyMap<string, Column>;
  /**
   * The column holding the university a row belongs to; reads name the caller's universities in
   * it, so that on Citus a read of one university runs on that university's shard alone.
   */
  readonly tenantColumn: Column;
}

type ColumnSpec = [name: string, type: ColumnType, nullable?: boolean, extra?: Partial<Column>];

/** A table, or a read view with the table under it. */
type Source = string | { readonly view: string; readonly table: string };

function defineResource(name: string, source: Source, description: string, specs: ColumnSpec[], tenantKey = 'university_id'): Resource {
  const columns = specs.map(([columnName, type, nullable = false, extra = {}]) => ({ name: columnName, type, nullable, ...extra }));
  const columnsByName = new Map(columns.map((c) => [c.name, c]));
  const tenantColumn = columnsByName.get(tenantKey);
  if (!tenantColumn) throw new Error(`${name} has no column ${tenantKey}`);
  const [relation, table] = typeof source === 'string' ? [source, source] : [source.view, source.table];
  if (relation === table && columns.some((c) => c.derived)) throw new Error(`${name} derives columns without a view`);
  return { name, relation, table, description, columns, columnsByName, tenantColumn };
}

const id: ColumnSpec = ['id', 'uuid'];
const universityId: ColumnSpec = ['university_id', 'uuid'];
const studentId: ColumnSpec = ['student_id', 'uuid'];

export const resources: readonly Resource[] = [
  defineResource('students', { view: 'students_read', table: 'students' }, 'Students of the scope: identity plus membership of one cohort. Alumni are students with is_alumni true.', [
    id, universityId, ['cohort_id', 'uuid', true], ['email', 'text'], ['first_name', 'text'], ['last_name', 'text'],
    ['external_id', 'text', true], ['phone', 'text', true, { description: 'E.164' }],
    ['graduation_date', 'date', true, { description: 'Date of actual graduation' }],
    ['graduation_year', 'integer', true, { description: 'Year of graduation_date (read-only)' }],
    ['is_alumni', 'boolean'], ['account_status', 'text', false, { enum: ACCOUNT_STATUSES }],
    ['secondary_emails', 'text[]', false, { derived: true }], ['created_at', 'timestamptz'], ['updated_at', 'timestamptz'],
  ]),
  defineResource('advisor_students', 'advisor_students', 'Advisor assignments of students.', [
    id, universityId, studentId, ['advisor_id', 'uuid'], ['advisor_email', 'text'], ['advisor_name', 'text'],
    ['co_advisor_ids', 'uuid[]'], ['assigned_at', 'timestamptz'],
  ]),
  defineResource('cohorts', { view: 'cohorts_read', table: 'cohorts' }, 'Cohorts: a class with its degree, dates, campus, intake and résumé templates.', [
    id, universityId, ['name', 'text'], ['display_name', 'text'], ['program', 'text'], ['degree', 'text'],
    ['start_date', 'date'], ['end_date', 'date'], ['intake_year', 'integer'],
    ['intake_term', 'text', false, { enum: INTAKE_TERMS }],
    ['campus_id', 'uuid', true], ['campus_name', 'text', true, { derived: true }],
    ['study_mode', 'text', true, { enum: STUDY_MODES }],
    ['resume_template_names', 'text[]'], ['student_count', 'integer', false, { derived: true }], ['created_at', 'timestamptz'], ['updated_at', 'timestamptz'],
  ]),
  defineResource('campuses', 'campuses', 'Campuses; use to check a campus name before a cohort write.', [
    id, universityId, ['name', 'text'], ['city', 'text', true], ['country', 'text', true], ['created_at', 'timestamptz'],
  ]),
  defineResource('resumes', 'resumes', 'Résumés of students.', [
    id, universityId, studentId, ['title', 'text'], ['template_name', 'text', true],
    ['content', 'text', false, { large: true }], ['is_primary', 'boolean'], ['created_at', 'timestamptz'], ['updated_at', 'timestamptz'],
  ]),
  defineResource('student_profiles', 'student_profiles', 'Student profiles.', [
    id, universityId, studentId, ['headline', 'text', true], ['summary', 'text', true], ['skills', 'text[]'],
    ['sections', 'jsonb', false, { large: true }], ['visibility', 'text'], ['updated_at', 'timestamptz'],
  ]),
  defineResource('onboarding', 'onboarding', 'Onboarding progress of students.', [
    id, universityId, studentId, ['status', 'text', false, { enum: ONBOARDING_STATUSES }],
    ['steps_completed', 'integer'], ['steps_total', 'integer'], ['completed_at', 'timestamptz', true], ['updated_at', 'timestamptz'],
  ]),
  defineResource('alumni', 'alumni', 'Read-only directory of alumni contacts for student outreach (not where graduation is recorded).', [
    id, universityId, ['first_name', 'text'], ['last_name', 'text'], ['email', 'text', true], ['graduation_year', 'integer', true],
    ['degree', 'text', true], ['employer', 'text', true], ['job_title', 'text', true], ['city', 'text', true],
    ['linkedin_url', 'text', true], ['open_to_mentoring', 'boolean'], ['updated_at', 'timestamptz'],
  ]),
  defineResource('jobs', 'jobs', 'Job postings.', [
    id, universityId, ['company_id', 'uuid', true], ['title', 'text'], ['description', 'text', false, { large: true }],
    ['location', 'text', true], ['employment_type', 'text', true], ['remote', 'boolean'], ['salary_min', 'numeric', true],
    ['salary_max', 'numeric', true], ['posted_at', 'timestamptz'], ['expires_at', 'timestamptz', true],
  ]),
  defineResource('universities', 'universities', 'One row for a university token; one per member school for a consortium token.', [
    id, ['name', 'text'], ['short_name', 'text', true], ['consortium_id', 'uuid', true], ['country', 'text', true],
    ['timezone', 'text', true], ['created_at', 'timestamptz'],
  ], 'id'),
  defineResource('student_engagement', 'student_engagement', 'Engagement totals per student.', [
    id, universityId, studentId, ['last_active_at', 'timestamptz', true], ['logins_30d', 'integer'], ['applications_total', 'integer'],
    ['events_attended_total', 'integer'], ['appointments_total', 'integer'], ['resume_count', 'integer'],
    ['profile_completeness', 'integer', false, { description: '0 to 100' }], ['updated_at', 'timestamptz'],
  ]),
  defineResource('student_engagement_monthly', 'student_engagement_monthly', 'Engagement per student per month.', [
    id, universityId, studentId, ['month', 'date', false, { description: 'First day of the month' }], ['logins', 'integer'],
    ['applications', 'integer'], ['events_attended', 'integer'], ['appointments', 'integer'],
  ]),
  defineResource('companies', 'companies', 'Employers.', [
    id, universityId, ['name', 'text'], ['industry', 'text', true], ['website', 'text', true], ['size_band', 'text', true],
    ['city', 'text', true], ['country', 'text', true], ['created_at', 'timestamptz'],
  ]),
  defineResource('events', 'events', 'Career events.', [
    id, universityId, ['campus_id', 'uuid', true], ['title', 'text'], ['kind', 'text'], ['starts_at', 'timestamptz'],
    ['ends_at', 'timestamptz', true], ['location', 'text', true], ['capacity', 'integer', true],
    ['registrations_count', 'integer'], ['created_at', 'timestamptz'],
  ]),
];

export const resourcesByName: ReadonlyMap<string, Resource> = new Map(resources.map((r) => [r.name, r]));

/**
 * The resources the change feed follows (src/query/changes.ts), in the order their entries take
 * within one change number (their names' order: a feed position compares them as text).
 */
export const FEED_RESOURCES = ['cohorts', 'students'] as const;
export type FeedResource = (typeof FEED_RESOURCES)[number];
