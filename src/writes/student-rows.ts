/**
 * Validation of student batch rows (docs/decisions.md, "Student writes", for the order the
 * checks run in), the fields read off the student's write shape.
 */
import { domainToASCII } from 'node:url';
import { emailKey } from '../domain/email-register.ts';
import { PHONE_PATTERN, hasNul, hasRefusedCharacter, isAscii, longerThan } from '../resources/text.ts';
import { STUDENT_SHAPE, fieldNames } from '../resources/write-shapes.ts';
import { type Rejection, type WriteMode, reject } from './batch.ts';
import { NOT_AN_OBJECT, asObject, createFieldsRequired, firstTextProblem, isBlank, kindProblem } from './field-checks.ts';
import type { StudentRowCode } from './row-codes.ts';

export type StudentRejection = Rejection<StudentRowCode>;

/** The fields a student record holds; every other sent key is reported in dropped_fields. */
export const STUDENT_FIELDS: ReadonlySet<string> = new Set(fieldNames(STUDENT_SHAPE));

/** A character of an address: not white space, not a dot, and none of RFC 5321's specials. */
const ADDRESS_CHARACTER = '[^\\s@"(),:;<>[\\\\\\].]';
/** A domain label: address characters, neither first nor last a hyphen. */
const LABEL = `(?!-)${ADDRESS_CHARACTER}+(?<!-)`;
/** Dot-atom words, `@`, and two or more labels. */
const ADDRESS = new RegExp(`^${ADDRESS_CHARACTER}+(?:\\.${ADDRESS_CHARACTER}+)*@${LABEL}(?:\\.${LABEL})+$`);
/** Invisible formatting characters (a zero-width space, a direction mark): an address holding one looks like another. */
const INVISIBLE = /\p{Cf}/u;

/** RFC 5321's limit on a local part, in bytes (RFC 6531 counts its UTF-8). */
const MAX_LOCAL_PART_BYTES = 64;
/** RFC 1035's limit on a domain label, counted in its ASCII form (an IDN label's punycode). */
const MAX_LABEL_LENGTH = 63;

/** A label's length as DNS counts it: an IDN label's is its ASCII (punycode) form's, or as sent when it has none. */
const labelLength = (label: string) => (isAscii(label) ? label : domainToASCII(label) || label).length;

/**
 * An address whose local part is dots between words (no leading, trailing or double dot) of at
 * most 64 bytes, and whose domain is labels neither empty, nor starting or ending with a hyphen,
 * nor longer than 63 characters (RFC 5321's dot-atom and its local-part limit, RFC 1035's
 * labels): `a..b@u.edu`, `.a@u.edu`, `a@-u.edu` and `a@u.edu.` were taken as addresses, and so
 * were a 65-byte local part and a 64-character label, which no mail server takes. An ASCII domain
 * of 63 characters or fewer has no label to measure: the check of a 500-row batch's addresses
 * took 245 µs splitting every address into words and labels, and 50 with one expression.
 */
function isAddress(email: string): boolean {
  if (!ADDRESS.test(email)) return false;
  const at = email.indexOf('@');
  const domain = email.slice(at + 1);
  return Buffer.byteLength(email.slice(0, at)) <= MAX_LOCAL_PART_BYTES
    && ((domain.length <= MAX_LABEL_LENGTH && isAscii(domain)) || domain.split('.').every((label) => labelLength(label) <= MAX_LABEL_LENGTH));
}

/**
 * Whether a sent address is one the service takes (else INVALID_EMAIL): the partners' rows and
 * the operator API (the `idn-email` format, src/http/validation.ts) hold addresses to one rule.
 * The length is the key's, as stored: `İ` lower-cases to two characters, and an address read
 * back from the service must be one it takes as a key (240 of them were stored as 480).
 */
export const isEmailAddress = (sent: string): boolean => isKeyOfAddress(emailKey(sent));

/** Whether an address's key (emailKey) is one the service takes (isEmailAddress). */
const isKeyOfAddress = (email: string) =>
  !longerThan(email, STUDENT_SHAPE.fields.email.maxLength) && isAddress(email) && !hasRefusedCharacter(email) && !INVISIBLE.test(email);

const E164 = new RegExp(PHONE_PATTERN);
const NOT_AN_ADDRESS = 'email is not a valid address.';

/** A row that passed validation. Absent fields are `undefined`; null means "clear". */
export interface StudentRow {
  readonly index: number;
  /** As sent, for the result row; `email` is trimmed and lower-cased. */
  readonly sentEmail: string;
  readonly email: string;
  readonly firstName?: string;
  readonly lastName?: string;
  readonly cohortName?: string;
  readonly isAlumni?: boolean;
  readonly externalId?: string | null;
  readonly phone?: string | null;
  readonly graduationDate?: string | null;
}

export type ValidatedStudentRow = { ok: StudentRow } | { rejected: StudentRejection; sentEmail: string | null };

type Row = Readonly<Record<string, unknown>>;
type Problem = { readonly code: StudentRowCode; readonly message: string } | null;

/** Fields checked for their kind alone; email and phone have codes of their own. */
const KIND_CHECKED = ['first_name', 'last_name', 'cohort_name', 'external_id', 'is_alumni', 'graduation_date'] as const;
/** A null in these is reported as the field missing (MISSING_NAME, MISSING_COHORT), in every mode. */
const NULL_IS_MISSING: ReadonlySet<string> = new Set(['first_name', 'last_name', 'cohort_name']);

/** The kinds of the plain fields, and a blank external_id. */
function kindsProblem(row: Row, creating: boolean): Problem {
  for (const name of KIND_CHECKED) {
    const value = row[name];
    // A null is_alumni on create is missing, not of the wrong kind.
    if (value === null && (NULL_IS_MISSING.has(name) || (name === 'is_alumni' && creating))) continue;
    const problem = kindProblem(name, STUDENT_SHAPE.fields[name], value);
    if (problem) return { code: 'INVALID_FIELD', message: problem };
  }
  if (typeof row.external_id === 'string' && isBlank(row.external_id)) {
    return { code: 'INVALID_FIELD', message: 'external_id must not be blank; send null to clear it.' };
  }
  return null;
}

/** A field required on create that is absent then, or null or blank at any time. */
const isMissing = (value: unknown, creating: boolean) =>
  (creating && value === undefined) || value === null || (typeof value === 'string' && isBlank(value));

/** Names, phone, cohort and is_alumni, in that order, each with its own code. */
function requiredProblem(row: Row, creating: boolean): Problem {
  for (const name of ['first_name', 'last_name'] as const) {
    if (isMissing(row[name], creating)) return { code: 'MISSING_NAME', message: `${name} is required and must not be blank.` };
  }
  if (row.phone !== undefined && row.phone !== null && (typeof row.phone !== 'string' || !E164.test(row.phone))) {
    return { code: 'INVALID_PHONE', message: 'phone must be in E.164 form (a leading + and the country code), or null.' };
  }
  if (isMissing(row.cohort_name, creating)) {
    return { code: 'MISSING_COHORT', message: 'cohort_name is required and must name a cohort of the university.' };
  }
  if (creating && (row.is_alumni === undefined || row.is_alumni === null)) {
    return { code: 'MISSING_IS_ALUMNI', message: 'is_alumni is required on POST and PUT (true or false), as every create field is.' };
  }
  return null;
}

const trimmed = (value: unknown) => (typeof value === 'string' ? value.trim() : undefined);

function studentRow(row: Row, index: number, sentEmail: string, email: string): StudentRow {
  return {
    index,
    sentEmail,
    email,
    firstName: trimmed(row.first_name),
    lastName: trimmed(row.last_name),
    cohortName: trimmed(row.cohort_name),
    isAlumni: row.is_alumni as boolean | undefined,
    externalId: row.external_id === null ? null : trimmed(row.external_id),
    phone: row.phone as string | null | undefined,
    graduationDate: row.graduation_date as string | null | undefined,
  };
}

/** The addresses, numbers and cohort names a batch's state is read by (src/writes/student-store.ts), each once. */
export interface StudentKeys {
  readonly emails: readonly string[];
  readonly externalIds: readonly string[];
  readonly cohortNames: readonly string[];
}

/** What of a row its state is read by. */
type RowKeys = Pick<StudentRow, 'email' | 'externalId' | 'cohortName'>;

/** The keys of `rows`, each once. */
export function studentKeys(rows: readonly RowKeys[]): StudentKeys {
  const emails = new Set<string>();
  const externalIds = new Set<string>();
  const cohortNames = new Set<string>();
  for (const row of rows) {
    emails.add(row.email);
    if (row.externalId) externalIds.add(row.externalId);
    if (row.cohortName) cohortNames.add(row.cohortName);
  }
  return { emails: [...emails], externalIds: [...externalIds], cohortNames: [...cohortNames] };
}

/** A key as studentRow makes it, when the database can look it up. */
const sentKey = (value: unknown) => {
  const key = trimmed(value);
  return key !== undefined && !hasNul(key) ? key : undefined;
};

/**
 * The keys the rows send, made as studentRow makes a valid row's, whether the row is valid or
 * not (but for text the database refuses, which no valid row holds): they include the keys of
 * every row that passes validation, so a batch's state can be read while its rows are validated
 * (writeStudents).
 */
export function sentStudentKeys(raw: readonly unknown[]): StudentKeys {
  const keys: RowKeys[] = [];
  for (const sent of raw) {
    const row = asObject(sent);
    if (row === null || typeof row.email !== 'string' || hasNul(row.email)) continue;
    keys.push({ email: emailKey(row.email), externalId: sentKey(row.external_id), cohortName: sentKey(row.cohort_name) });
  }
  return studentKeys(keys);
}

const rejectedRow = (code: StudentRowCode, message: string, sentEmail: string | null): ValidatedStudentRow => ({ rejected: reject(code, message), sentEmail });

export function validateStudentRow(raw: unknown, index: number, mode: WriteMode): ValidatedStudentRow {
  const row = asObject(raw);
  if (row === null) return rejectedRow('INVALID_FIELD', NOT_AN_OBJECT, null);
  if (typeof row.email !== 'string') {
    return rejectedRow('INVALID_EMAIL', row.email === undefined ? 'email is required.' : NOT_AN_ADDRESS, null);
  }
  const sentEmail = row.email;
  const email = emailKey(sentEmail);
  if (!isKeyOfAddress(email)) return rejectedRow('INVALID_EMAIL', NOT_AN_ADDRESS, sentEmail);
  const creating = createFieldsRequired(STUDENT_SHAPE, mode);
  const problem = kindsProblem(row, creating) ?? requiredProblem(row, creating);
  if (problem) return rejectedRow(problem.code, problem.message, sentEmail);
  const textProblem = firstTextProblem(STUDENT_SHAPE, row);
  if (textProblem) return rejectedRow('INVALID_FIELD', textProblem, sentEmail);
  return { ok: studentRow(row, index, sentEmail, email) };
}

/**
 * Validates a batch's rows in request order. A row naming an email or external_id that an earlier
 * row named, valid or not, is DUPLICATE_IN_BATCH whatever else is wrong with it; an email that is
 * no address names no one (docs/decisions.md, Student writes). Addresses and numbers have sets of
 * their own, not prefixed keys in one: that halved the check for a 500-row replay (300 → 150–170
 * µs, measured when it ran in decideStudentBatch).
 */
export function validateStudentBatch(raw: readonly unknown[], mode: WriteMode): ValidatedStudentRow[] {
  const seenEmails = new Set<string>();
  const seenExternalIds = new Set<string>();
  return raw.map((sent, index) => {
    const validated = validateStudentRow(sent, index, mode);
    // A refused row names its address and number all the same.
    const { sentEmail, email, externalId } = 'ok' in validated ? validated.ok
      : { sentEmail: validated.sentEmail, email: validated.sentEmail === null ? null : emailKey(validated.sentEmail), externalId: trimmed(asObject(sent)?.external_id) };
    const addressed = 'ok' in validated || validated.rejected.code !== 'INVALID_EMAIL';
    const duplicate = (addressed && email !== null && seenEmails.has(email)) || (externalId ? seenExternalIds.has(externalId) : false);
    if (email !== null) seenEmails.add(email);
    if (externalId) seenExternalIds.add(externalId);
    return duplicate ? rejectedRow('DUPLICATE_IN_BATCH', 'An earlier row of this batch names the same email or external_id; nothing was written for this row.', sentEmail) : validated;
  });
}
