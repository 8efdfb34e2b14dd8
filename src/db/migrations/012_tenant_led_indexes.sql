-- Every index of a tenant table leads with the tenant column (010). Five did not (001): a read
-- filtering on another university's cohort or student by its id (`cohort_id=eq.<id>`) fetched
-- that university's rows by the index before row-level security dropped them, so it took longer
-- the more there were, 7.7 ms against 2.7 ms for a cohort of 1,965 students: a timing side
-- channel. Led by the tenant, an index reaches the token's universities' entries alone. The same
-- columns serve the joins and the foreign keys, which name (university_id, <id>). One block:
-- Citus takes one DDL command per message on a distributed table (docs/scaling.md, rule 8).
DO $$
BEGIN
  DROP INDEX students_cohort_idx;
  CREATE INDEX students_cohort_idx ON students (university_id, cohort_id);
  DROP INDEX secondary_emails_student_idx;
  CREATE INDEX secondary_emails_student_idx ON secondary_emails (university_id, student_id);
  DROP INDEX alumni_flag_history_student_idx;
  CREATE INDEX alumni_flag_history_student_idx ON alumni_flag_history (university_id, student_id, id);
  DROP INDEX advisor_students_student_idx;
  CREATE INDEX advisor_students_student_idx ON advisor_students (university_id, student_id);
  DROP INDEX resumes_student_idx;
  CREATE INDEX resumes_student_idx ON resumes (university_id, student_id);
END
$$;
