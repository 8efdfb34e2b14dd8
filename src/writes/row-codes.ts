/**
 * The codes a rejected batch row carries, per resource, each with when it arises (the docs'
 * tables are generated from these). A row code is not an HTTP error: the batch still answers 200.
 */
import { COHORT_SHAPE, STUDENT_SHAPE, type WritableResource } from '../resources/write-shapes.ts';

export const STUDENT_ROW_CODES = {
  INVALID_EMAIL: `email is absent, not an address, over ${STUDENT_SHAPE.fields.email.maxLength} characters once lower-cased, or with control characters, unpaired surrogates or invisible formatting characters (a zero-width space, a direction mark).`,
  INVALID_FIELD: 'A field has the wrong type, a bad date, a blank external_id, or a string too long or with control characters or unpaired surrogates; the message names the field.',
  MISSING_NAME: 'first_name or last_name is absent on create, null, or blank.',
  INVALID_PHONE: 'phone is not in E.164 form (a leading + and the country code).',
  MISSING_COHORT: 'cohort_name is absent on create, null, or blank.',
  MISSING_IS_ALUMNI: 'is_alumni is absent or null on create.',
  COHORT_NOT_FOUND: 'No cohort of the university has that name; create it first with POST /v1/cohorts.',
  COHORT_NAME_AMBIGUOUS: 'Several cohorts of the university share that name.',
  EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY: 'The address is an account of another university (a student or a self-serve account); it is never adopted.',
  EMAIL_BELONGS_TO_EXISTING_ACCOUNT: 'The address belongs to a user who is not on the roster (a self-serve account of the university or of none); do not retry.',
  EMAIL_BELONGS_TO_NON_STUDENT: 'The address belongs to a staff account.',
  EXTERNAL_ID_CONFLICT: 'The external_id and the email name different students, or the email\'s student holds another external_id.',
  ACCOUNT_DELETED: 'The email or external_id belongs to an erased account, which is never recreated.',
  NOT_FOUND: 'PATCH: no student matches the external_id or email.',
  ALREADY_EXISTS: 'POST: the student exists already.',
  DUPLICATE_IN_BATCH: 'An earlier row of the batch names the same email or external_id, or the same student.',
  CONCURRENT_WRITE: 'The row lost a race to another write (for its address, or a deadlock between the two), again after one retry; retry the row.',
} as const;

export const COHORT_ROW_CODES = {
  INVALID_NAME: `name is empty, blank, over ${COHORT_SHAPE.fields.name.maxLength} characters, or with control characters or unpaired surrogates.`,
  INVALID_FIELD: 'A field (name included) has the wrong type, a bad date or year, a value outside its enumeration, null on a required field, a blank value or template name, or a string too long or with control characters or unpaired surrogates.',
  MISSING_FIELD: 'name is absent, or a field required to create a cohort is (POST, and PUT of a name no cohort has).',
  INVALID_DATE_RANGE: 'end_date is not after start_date, as sent or once merged with the stored cohort.',
  NAME_AMBIGUOUS: 'Several cohorts of the university share that name.',
  ALREADY_EXISTS: 'POST: a cohort of that name exists already.',
  NOT_FOUND: 'PATCH: no cohort of the university has that name.',
  CAMPUS_NOT_FOUND: 'No campus of the university has that campus_name.',
  UNKNOWN_TEMPLATE: 'A resume_template_names entry is not a template of the university (checked on create).',
} as const;

/** Each writable resource's row codes. */
export const ROW_CODES: Record<WritableResource, Readonly<Record<string, string>>> = {
  students: STUDENT_ROW_CODES,
  cohorts: COHORT_ROW_CODES,
};

export type StudentRowCode = keyof typeof STUDENT_ROW_CODES;
export type CohortRowCode = keyof typeof COHORT_ROW_CODES;
