/**
 * What every new cohort must satisfy, whoever creates it: a partner's batch
 * (src/writes/cohort-rules.ts) and the app's own create (src/domain/onboarding.ts).
 */

/** Whether a cohort's end_date is after its start_date (dates as `YYYY-MM-DD` compare as text). */
export const datesInOrder = (startDate: string, endDate: string): boolean => endDate > startDate;

/** The résumé templates a new cohort names that its university does not have. */
export const unknownTemplates = (names: readonly string[] | null | undefined, known: ReadonlySet<string>): string[] =>
  (names ?? []).filter((name) => !known.has(name));
