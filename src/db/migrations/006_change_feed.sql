-- The change feed (src/query/changes.ts, docs/api.md "Change feed"). Every change to a
-- university's students and cohorts takes the university's row of `tenants` (src/db/locks.ts);
-- the same statement now counts it, so each committing transaction gets the next number of its
-- university, in commit order (the row lock is held to commit). The rows it writes carry that
-- number in change_seq (and, when it created them, in created_seq); an erased row leaves a
-- tombstone holding only its id. Existing rows keep 0, before any number a change draws, so a feed
-- read from the start shows them.
-- One DO block, one message: Citus refuses several DDL statements in one message on distributed tables.
DO $$
BEGIN
  ALTER TABLE tenants ADD COLUMN change_seq bigint NOT NULL DEFAULT 0;
  ALTER TABLE students ADD COLUMN change_seq bigint NOT NULL DEFAULT 0, ADD COLUMN created_seq bigint NOT NULL DEFAULT 0;
  ALTER TABLE cohorts ADD COLUMN change_seq bigint NOT NULL DEFAULT 0, ADD COLUMN created_seq bigint NOT NULL DEFAULT 0;
  CREATE INDEX students_change_seq_idx ON students (university_id, change_seq, id);
  CREATE INDEX cohorts_change_seq_idx ON cohorts (university_id, change_seq, id);

  -- Kept indefinitely (docs/api.md, "Change feed"): an id and a number, no personal data.
  CREATE TABLE change_tombstones (
    university_id uuid NOT NULL,
    resource text NOT NULL CHECK (resource IN ('students', 'cohorts')),
    id uuid NOT NULL,
    change_seq bigint NOT NULL,
    PRIMARY KEY (university_id, change_seq, resource, id)
  );
  ALTER TABLE change_tombstones ENABLE ROW LEVEL SECURITY;
  ALTER TABLE change_tombstones FORCE ROW LEVEL SECURITY;
  CREATE POLICY tenant_scope ON change_tombstones TO pds_app
    USING (university_id = ANY (pds_scope())) WITH CHECK (university_id = ANY (pds_scope()));
  CREATE POLICY operator_all ON change_tombstones TO pds_operator USING (true) WITH CHECK (true);
  GRANT SELECT ON change_tombstones TO pds_app;
  GRANT ALL ON change_tombstones TO pds_operator;

  -- The read shapes carry the numbers at their end; the registry (src/resources/registry.ts)
  -- names the columns reads may return, and these are not among them.
  CREATE OR REPLACE VIEW students_read WITH (security_invoker = true) AS
  SELECT s.id, s.university_id, s.cohort_id, s.email, s.first_name, s.last_name, s.external_id, s.phone,
         s.graduation_date, s.graduation_year, s.is_alumni, s.account_status,
         coalesce(se.addresses, '{}') AS secondary_emails,
         s.created_at, s.updated_at, s.change_seq, s.created_seq
  FROM students s
  LEFT JOIN (SELECT university_id, student_id, array_agg(email ORDER BY created_at, email) AS addresses
             FROM secondary_emails GROUP BY university_id, student_id) se
    ON se.university_id = s.university_id AND se.student_id = s.id;

  CREATE OR REPLACE VIEW cohorts_read WITH (security_invoker = true) AS
  SELECT c.id, c.university_id, c.name, c.display_name, c.program, c.degree, c.start_date, c.end_date,
         c.intake_year, c.intake_term, c.campus_id, cp.name AS campus_name,
         c.study_mode, c.resume_template_names, coalesce(sc.students, 0) AS student_count,
         c.created_at, c.updated_at, c.change_seq, c.created_seq
  FROM cohorts c
  LEFT JOIN campuses cp ON cp.university_id = c.university_id AND cp.id = c.campus_id
  LEFT JOIN (SELECT university_id, cohort_id, count(*)::integer AS students
             FROM students WHERE cohort_id IS NOT NULL GROUP BY university_id, cohort_id) sc
    ON sc.university_id = c.university_id AND sc.cohort_id = c.id;

  -- On Citus: distributed by university and co-located with tenants, so an erasure's tombstone
  -- and the feed's read of it run on the university's shard.
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    PERFORM create_distributed_table('change_tombstones', 'university_id', colocate_with => 'tenants');
  END IF;
END $$;
