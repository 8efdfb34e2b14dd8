-- One schema for a single PostgreSQL server (or PGlite) and for a Citus cluster sharded by
-- university (docs/scaling.md). Every key and reference of a tenant table includes
-- university_id, the distribution column; policies read the scope without a subquery; the
-- service-wide address uniqueness moves to a register of its own. The last block distributes the
-- tables when the citus extension is installed in this database, and does nothing otherwise.

-- Accounts without a university (self-serve, some staff) are their own tenant: university_id is
-- the account's own id, so the column is never null (a distribution column cannot be) and such
-- accounts spread over the shards. The operator API shows them without a university
-- (src/domain/operator-records.ts); no university has an account's id.
ALTER TABLE accounts DROP CONSTRAINT accounts_university_id_fkey;
UPDATE accounts SET university_id = id WHERE university_id IS NULL;
ALTER TABLE accounts ALTER COLUMN university_id SET NOT NULL;
ALTER TABLE accounts ADD CONSTRAINT accounts_student_university_check CHECK (kind <> 'student' OR university_id <> id);

-- Who holds each address across the whole service, keyed by the address's SHA-256 (hex of its
-- UTF-8 bytes): the live owner, or an erased student whose address may never come back. A write
-- claims an address here (insert … on conflict do nothing) before it creates the account or the
-- secondary address; the primary key is the service-wide uniqueness. Only the hash is kept, so
-- the register holds no address and an erased one stays blocked without being stored.
CREATE TABLE email_register (
  email_hash text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('student', 'staff', 'self_serve')),
  -- Null for an account without a university.
  university_id uuid,
  erased boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO email_register (email_hash, kind, university_id)
SELECT encode(sha256(convert_to(email, 'UTF8')), 'hex'), kind, nullif(university_id, id) FROM accounts WHERE email IS NOT NULL
UNION ALL
SELECT encode(sha256(convert_to(email, 'UTF8')), 'hex'), 'student', university_id FROM secondary_emails;
INSERT INTO email_register (email_hash, kind, university_id, erased)
SELECT erased_email_hash, 'student', university_id, true FROM accounts WHERE erased_email_hash IS NOT NULL
ON CONFLICT (email_hash) DO NOTHING;
DROP FUNCTION pds_email_owners(text[]);

-- One row per university among the tenant tables' shards: a batch locks its university's row
-- (src/db/locks.ts), which serialises on whichever node holds it, and set-based inserts of
-- demo data read from it so that they run on the shards themselves (src/domain/demo-data.ts).
CREATE TABLE tenants (university_id uuid PRIMARY KEY REFERENCES universities(id));
INSERT INTO tenants (university_id) SELECT id FROM universities;

-- Keys that include the distribution column. Dropping a primary key drops the references to it
-- (CASCADE); they come back at the end, composite, under their old names.
DROP VIEW students_read, cohorts_read;
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['campuses', 'resume_templates', 'accounts', 'cohorts', 'students', 'alumni_flag_history',
    'advisor_students', 'resumes', 'student_profiles', 'onboarding', 'alumni', 'companies', 'jobs', 'events',
    'student_engagement', 'student_engagement_monthly']
  LOOP
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I CASCADE', t, t || '_pkey');
    EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (id, university_id)', t);
  END LOOP;
END $$;
ALTER TABLE secondary_emails DROP CONSTRAINT secondary_emails_pkey CASCADE;
ALTER TABLE secondary_emails ADD PRIMARY KEY (university_id, email);

-- Unique per university; across universities the register decides.
DROP INDEX accounts_email_key;
CREATE UNIQUE INDEX accounts_email_key ON accounts (university_id, email);
DROP INDEX students_email_key;
CREATE UNIQUE INDEX students_email_key ON students (university_id, email);
ALTER TABLE student_profiles DROP CONSTRAINT student_profiles_student_id_key;
ALTER TABLE student_profiles ADD CONSTRAINT student_profiles_student_id_key UNIQUE (university_id, student_id);
ALTER TABLE onboarding DROP CONSTRAINT onboarding_student_id_key;
ALTER TABLE onboarding ADD CONSTRAINT onboarding_student_id_key UNIQUE (university_id, student_id);
ALTER TABLE student_engagement DROP CONSTRAINT student_engagement_student_id_key;
ALTER TABLE student_engagement ADD CONSTRAINT student_engagement_student_id_key UNIQUE (university_id, student_id);
ALTER TABLE student_engagement_monthly DROP CONSTRAINT student_engagement_monthly_student_id_month_key;
ALTER TABLE student_engagement_monthly ADD CONSTRAINT student_engagement_monthly_student_id_month_key UNIQUE (university_id, student_id, month);

-- Read shapes without correlated subqueries: the derived columns are joined on the tenant key,
-- so a read of one university is planned for that university's shard alone.
CREATE VIEW students_read WITH (security_invoker = true) AS
SELECT s.id, s.university_id, s.cohort_id, s.email, s.first_name, s.last_name, s.external_id, s.phone,
       s.graduation_date, s.graduation_year, s.is_alumni, s.account_status,
       coalesce(se.addresses, '{}') AS secondary_emails,
       s.created_at, s.updated_at
FROM students s
LEFT JOIN (SELECT university_id, student_id, array_agg(email ORDER BY created_at, email) AS addresses
           FROM secondary_emails GROUP BY university_id, student_id) se
  ON se.university_id = s.university_id AND se.student_id = s.id;

CREATE VIEW cohorts_read WITH (security_invoker = true) AS
SELECT c.id, c.university_id, c.name, c.display_name, c.program, c.degree, c.start_date, c.end_date,
       c.intake_year, c.intake_term, c.campus_id, cp.name AS campus_name,
       c.study_mode, c.resume_template_names, coalesce(sc.students, 0) AS student_count,
       c.created_at, c.updated_at
FROM cohorts c
LEFT JOIN campuses cp ON cp.university_id = c.university_id AND cp.id = c.campus_id
LEFT JOIN (SELECT university_id, cohort_id, count(*)::integer AS students
           FROM students WHERE cohort_id IS NOT NULL GROUP BY university_id, cohort_id) sc
  ON sc.university_id = c.university_id AND sc.cohort_id = c.id;

-- Policies call pds_scope() directly: Citus refuses subqueries in policies of distributed tables.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['campuses', 'resume_templates', 'accounts', 'cohorts', 'students', 'secondary_emails',
    'alumni_flag_history', 'advisor_students', 'resumes', 'student_profiles', 'onboarding', 'alumni', 'companies',
    'jobs', 'events', 'student_engagement', 'student_engagement_monthly', 'tenants']
  LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('DROP POLICY IF EXISTS tenant_scope ON %I', t);
    EXECUTE format('CREATE POLICY tenant_scope ON %I TO pds_app USING (university_id = ANY (pds_scope())) WITH CHECK (university_id = ANY (pds_scope()))', t);
    EXECUTE format('DROP POLICY IF EXISTS operator_all ON %I', t);
    EXECUTE format('CREATE POLICY operator_all ON %I TO pds_operator USING (true) WITH CHECK (true)', t);
  END LOOP;
END $$;
DROP POLICY tenant_scope ON universities;
CREATE POLICY tenant_scope ON universities TO pds_app USING (id = ANY (pds_scope()));

-- A partner sees whether an address is taken and by what kind of owner, and claims addresses
-- for its own university only.
ALTER TABLE email_register ENABLE ROW LEVEL SECURITY;
ALTER TABLE email_register FORCE ROW LEVEL SECURITY;
CREATE POLICY register_read ON email_register FOR SELECT TO pds_app USING (true);
CREATE POLICY register_claim ON email_register FOR INSERT TO pds_app WITH CHECK (kind = 'student' AND university_id = ANY (pds_scope()));
CREATE POLICY operator_all ON email_register TO pds_operator USING (true) WITH CHECK (true);

GRANT SELECT ON students_read, cohorts_read TO pds_app;
GRANT SELECT, INSERT ON email_register TO pds_app;
GRANT SELECT, INSERT, UPDATE ON tenants TO pds_app;
GRANT ALL ON students_read, cohorts_read, email_register, tenants TO pds_operator;

-- On Citus: the shared tables become reference tables (a copy on every node), the tenant tables
-- are distributed by university_id and co-located with tenants, the register by its key over
-- few shards (a batch's claims touch every one of its shards; docs/scaling.md has the figures).
-- The roles log in: the coordinator connects to the workers as the role a statement runs as.
DO $$
DECLARE t text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
    RETURN;
  END IF;
  -- Distributing tables that this transaction changed needs one connection per node.
  PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
  -- Roles are the cluster's, shared by its databases: altered only when needed, so that databases
  -- migrated at the same time do not wait on each other's role changes on every node.
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname IN ('pds_app', 'pds_operator') AND NOT rolcanlogin) THEN
    ALTER ROLE pds_app LOGIN;
    ALTER ROLE pds_operator LOGIN;
  END IF;
  FOREACH t IN ARRAY ARRAY['consortia', 'universities', 'tokens'] LOOP
    PERFORM create_reference_table(t);
  END LOOP;
  PERFORM create_distributed_table('tenants', 'university_id');
  FOREACH t IN ARRAY ARRAY['accounts', 'campuses', 'resume_templates', 'companies', 'cohorts', 'students', 'secondary_emails',
    'alumni_flag_history', 'advisor_students', 'resumes', 'student_profiles', 'onboarding', 'alumni', 'jobs', 'events',
    'student_engagement', 'student_engagement_monthly']
  LOOP
    PERFORM create_distributed_table(t, 'university_id', colocate_with => 'tenants');
  END LOOP;
  PERFORM create_distributed_table('email_register', 'email_hash', shard_count => 4, colocate_with => 'none');
  -- Distributing copies a table's rows to its shards and leaves them in the coordinator's own
  -- table too, unread but stored; a database migrated with its data drops that copy.
  FOR t IN SELECT logicalrelid::text FROM pg_dist_partition LOOP
    PERFORM truncate_local_data_after_distributing_table(t::regclass);
  END LOOP;
  -- The views reached the workers with their tables, without the grants given above; a query
  -- Citus plans in steps reads a view there.
  GRANT SELECT ON students_read, cohorts_read TO pds_app;
  GRANT ALL ON students_read, cohorts_read TO pds_operator;
END $$;

-- The references between tenant tables, back under their old names, each including the tenant
-- key. They come after the distribution: Citus distributes a table only while no local table
-- references it. One DO block, one message: Citus refuses several DDL statements in one message
-- on distributed tables.
DO $$
DECLARE r text[];
BEGIN
  FOREACH r SLICE 1 IN ARRAY ARRAY[
    ['cohorts', 'campus_id', 'campuses', ''],
    ['students', 'id', 'accounts', ''],
    ['students', 'cohort_id', 'cohorts', ''],
    ['jobs', 'company_id', 'companies', ''],
    ['events', 'campus_id', 'campuses', ''],
    ['secondary_emails', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['advisor_students', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['resumes', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['student_profiles', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['onboarding', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['student_engagement', 'student_id', 'students', 'ON DELETE CASCADE'],
    ['student_engagement_monthly', 'student_id', 'students', 'ON DELETE CASCADE']]
  LOOP
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (university_id, %I) REFERENCES %I (university_id, id) %s',
      r[1], r[1] || '_' || r[2] || '_fkey', r[2], r[3], r[4]);
  END LOOP;
END $$;
