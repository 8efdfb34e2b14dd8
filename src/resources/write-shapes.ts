/**
 * The write shape of each writable resource: which fields a batch row may carry, of what kind,
 * which a create needs, which take null, their enumerations and maximum lengths. Row
 * validation, the write routes' body schemas, the operator API's cohort schema and the set of
 * writable resources all read these descriptors (docs/decisions.md,
 * "Student writes" and "Cohort writes").
 */
import { MAX_EMAIL_LENGTH, MAX_EXTERNAL_ID_LENGTH, MAX_NAME_LENGTH, MAX_PHONE_LENGTH } from './text.ts';

/** Mirrored by the CHECK constraints on cohorts in src/db/migrations/001_schema.sql. */
export const INTAKE_TERMS = ['Fall', 'Winter', 'Spring', 'Summer'] as const;
export const STUDY_MODES = ['full_time', 'part_time', 'online', 'hybrid'] as const;

/** The TypeScript value of each field kind; `text[]` bounds each entry by maxLength. */
interface KindValues {
  text: string;
  email: string;
  phone: string;
  date: string;
  boolean: boolean;
  integer: number;
  enum: string;
  'text[]': string[];
}
export type FieldKind = keyof KindValues;

export interface WriteField {
  readonly kind: FieldKind;
  readonly requiredOnCreate: boolean;
  /** Whether null is a value (it clears the field); otherwise null is refused or counts as missing. */
  readonly nullable: boolean;
  /** In characters (code points), as JSON Schema's maxLength counts. */
  readonly maxLength?: number;
  /** The least and greatest value of an integer field. */
  readonly range?: { readonly min: number; readonly max: number };
  readonly values?: readonly string[];
  readonly description?: string;
}

export interface WriteShape<Fields extends Readonly<Record<string, WriteField>> = Readonly<Record<string, WriteField>>> {
  /** The field that names a row within the university: never cleared, never changed by a write. */
  readonly key: keyof Fields & string;
  readonly fields: Fields;
  /**
   * What a PUT row needs: `create`, every field a create needs even when it matches a record
   * (src/writes/student-rows.ts); `key`, the key, and the create fields only when it creates
   * (src/writes/cohort-rules.ts), a matched record keeping what the row leaves out.
   */
  readonly put: 'create' | 'key';
  /**
   * Keys the contract says a row may carry that the record does not hold, with why: not saved,
   * listed in dropped_fields like any other unknown key, but described, so that a typed client
   * can send them.
   */
  readonly ignored?: Readonly<Record<string, string>>;
}

/** The value a field holds once validated. */
export type FieldValue<F extends WriteField> =
  | (F extends { readonly values: readonly (infer V)[] } ? V : KindValues[F['kind']])
  | (F['nullable'] extends true ? null : never);

/** Every field of a shape with its validated value. */
export type ShapeValues<S extends WriteShape> = { -readonly [K in keyof S['fields']]: FieldValue<S['fields'][K]> };

const name = { kind: 'text', requiredOnCreate: true, nullable: false, maxLength: MAX_NAME_LENGTH } as const;

export const STUDENT_SHAPE = {
  key: 'email',
  fields: {
    email: { kind: 'email', requiredOnCreate: true, nullable: false, maxLength: MAX_EMAIL_LENGTH, description: 'Unique across the service; the key for PATCH.' },
    first_name: name,
    last_name: name,
    cohort_name: { ...name, description: 'An existing cohort of your university; a different name moves the student.' },
    external_id: { kind: 'text', requiredOnCreate: false, nullable: true, maxLength: MAX_EXTERNAL_ID_LENGTH, description: 'Durable student number; matched before email.' },
    is_alumni: { kind: 'boolean', requiredOnCreate: true, nullable: false, description: 'Required on create.' },
    graduation_date: { kind: 'date', requiredOnCreate: false, nullable: true, description: 'Date of actual graduation.' },
    phone: { kind: 'phone', requiredOnCreate: false, nullable: true, maxLength: MAX_PHONE_LENGTH, description: 'E.164, e.g. +447700900123.' },
  },
  // The spec's student write shape requires its create fields of POST and PUT alike.
  put: 'create',
  ignored: {
    cohort_display_name: 'The cohort\'s display name belongs to the cohort (its `display_name`, written with the cohorts): not saved, listed in `dropped_fields`.',
  },
} as const satisfies WriteShape;

export const COHORT_SHAPE = {
  key: 'name',
  fields: {
    name: { ...name, description: 'The key within your university; frozen after creation.' },
    display_name: name,
    program: name,
    degree: name,
    start_date: { kind: 'date', requiredOnCreate: true, nullable: false },
    end_date: { kind: 'date', requiredOnCreate: true, nullable: false },
    // Intake years outside this range are typing mistakes.
    intake_year: { kind: 'integer', requiredOnCreate: true, nullable: false, range: { min: 1900, max: 2200 } },
    intake_term: { kind: 'enum', requiredOnCreate: true, nullable: false, values: INTAKE_TERMS },
    campus_name: { kind: 'text', requiredOnCreate: false, nullable: true, maxLength: MAX_NAME_LENGTH },
    study_mode: { kind: 'enum', requiredOnCreate: false, nullable: true, values: STUDY_MODES },
    resume_template_names: { kind: 'text[]', requiredOnCreate: false, nullable: true, maxLength: MAX_NAME_LENGTH },
  },
  // The spec's cohort fields are mandatory on create, and an omitted field is left alone.
  put: 'key',
} as const satisfies WriteShape;

type RequiredOnCreate<S extends WriteShape> = { [K in keyof S['fields']]: S['fields'][K]['requiredOnCreate'] extends true ? K : never }[keyof S['fields']];

/** What a create takes: the fields required on create, and the others optionally. */
export type CreateValues<S extends WriteShape> = Pick<ShapeValues<S>, RequiredOnCreate<S>> & Partial<ShapeValues<S>>;

export type CohortFieldValues = ShapeValues<typeof COHORT_SHAPE>;

/** The resources that accept batch writes, each with its shape; every other path answers 405. */
export const WRITE_SHAPES = { students: STUDENT_SHAPE, cohorts: COHORT_SHAPE } as const;
export type WritableResource = keyof typeof WRITE_SHAPES;
export const WRITABLE_RESOURCES = Object.keys(WRITE_SHAPES) as WritableResource[];

/** The names of a shape's fields, in declaration order. */
export const fieldNames = <S extends WriteShape>(shape: S) => Object.keys(shape.fields) as (keyof S['fields'] & string)[];
