-- Roles. pds_app serves partners and sees only the rows of the scope set per transaction;
-- pds_operator serves the operator API. Neither may bypass row-level security, so every
-- statement the service runs is bound by a policy.
DO $$ BEGIN CREATE ROLE pds_app NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE pds_operator NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN EXECUTE format('GRANT pds_app, pds_operator TO %I', current_user); END $$;

-- The token's scope: a comma-separated list of university ids, set per transaction.
CREATE FUNCTION pds_scope() RETURNS uuid[] LANGUAGE sql STABLE AS $$
  SELECT coalesce(string_to_array(nullif(current_setting('pds.scope', true), ''), ',')::uuid[], '{}'::uuid[])
$$;

CREATE TABLE consortia (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE universities (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  short_name text,
  consortium_id uuid REFERENCES consortia(id),
  country text,
  timezone text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX universities_consortium_idx ON universities (consortium_id);

CREATE TABLE campuses (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  name text NOT NULL,
  city text,
  country text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX campuses_university_name_idx ON campuses (university_id, name);

CREATE TABLE resume_templates (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (university_id, name)
);

-- Every person with a login identity. Erasure keeps a tombstone: the address and the student
-- number survive only as SHA-256 hashes, so an erased person is never recreated.
CREATE TABLE accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  kind text NOT NULL CHECK (kind IN ('student', 'staff', 'self_serve')),
  university_id uuid REFERENCES universities(id),
  email text CHECK (email = lower(email)),
  erased_at timestamptz,
  erased_email_hash text,
  erased_external_id_hash text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((email IS NULL) = (erased_at IS NOT NULL))
);
-- Addresses are stored lower-case (CHECK above), so a plain unique index is case-insensitive.
CREATE UNIQUE INDEX accounts_email_key ON accounts (email);
CREATE INDEX accounts_erased_email_idx ON accounts (erased_email_hash) WHERE erased_email_hash IS NOT NULL;
CREATE INDEX accounts_erased_external_id_idx ON accounts (university_id, erased_external_id_hash)
  WHERE erased_external_id_hash IS NOT NULL;
CREATE INDEX accounts_university_idx ON accounts (university_id);

CREATE TABLE cohorts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  name text NOT NULL,
  display_name text NOT NULL,
  program text NOT NULL,
  degree text NOT NULL,
  start_date date NOT NULL,
  end_date date NOT NULL,
  intake_year integer NOT NULL,
  intake_term text NOT NULL CHECK (intake_term IN ('Fall', 'Winter', 'Spring', 'Summer')),
  campus_id uuid REFERENCES campuses(id),
  study_mode text CHECK (study_mode IN ('full_time', 'part_time', 'online', 'hybrid')),
  resume_template_names text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Not unique: the platform's app can create same-named cohorts (legacy), which writes refuse.
CREATE INDEX cohorts_university_name_idx ON cohorts (university_id, name);

CREATE TABLE students (
  id uuid PRIMARY KEY REFERENCES accounts(id),
  -- No foreign key: RLS's WITH CHECK binds it to the token's university, and the account's own
  -- university_id is checked; one check less per row on 500-row batches.
  university_id uuid NOT NULL,
  cohort_id uuid REFERENCES cohorts(id),
  email text NOT NULL CHECK (email = lower(email)),
  first_name text NOT NULL,
  last_name text NOT NULL,
  external_id text,
  phone text,
  graduation_date date,
  graduation_year integer GENERATED ALWAYS AS (extract(year FROM graduation_date)::integer) STORED,
  is_alumni boolean NOT NULL DEFAULT false,
  account_status text NOT NULL DEFAULT 'invited' CHECK (account_status IN ('invited', 'claimed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX students_email_key ON students (email);
CREATE UNIQUE INDEX students_external_id_key ON students (university_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX students_university_id_idx ON students (university_id, id);
CREATE INDEX students_cohort_idx ON students (cohort_id);

-- Addresses recorded for a student besides the contact address; a login only once verified.
CREATE TABLE secondary_emails (
  email text PRIMARY KEY CHECK (email = lower(email)),
  student_id uuid NOT NULL REFERENCES students(id) ON DELETE CASCADE,
  university_id uuid NOT NULL REFERENCES universities(id),
  verified_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX secondary_emails_student_idx ON secondary_emails (student_id);
CREATE INDEX secondary_emails_university_idx ON secondary_emails (university_id);

-- An append-only log written only beside the student change it records; erasure deletes a
-- student's entries explicitly, so no per-row foreign-key check is paid on batch writes.
CREATE TABLE alumni_flag_history (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  university_id uuid NOT NULL,
  student_id uuid NOT NULL,
  is_alumni boolean NOT NULL,
  reason text NOT NULL CHECK (reason IN ('partner_api_push', 'sign_in', 'graduation_date_set', 'cohort_enrolment', 'cohort_move')),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX alumni_flag_history_student_idx ON alumni_flag_history (student_id, id);
CREATE INDEX alumni_flag_history_university_idx ON alumni_flag_history (university_id);

CREATE TABLE tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  token_hash text NOT NULL UNIQUE,
  university_id uuid REFERENCES universities(id),
  consortium_id uuid REFERENCES consortia(id),
  can_write boolean NOT NULL DEFAULT false,
  label text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  CHECK ((university_id IS NULL) <> (consortium_id IS NULL)),
  CHECK (NOT can_write OR university_id IS NOT NULL)
);

CREATE TABLE advisor_students (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL REFERENCES students(id) ON DELETE CASCADE,
  advisor_id uuid NOT NULL,
  advisor_email text NOT NULL,
  advisor_name text NOT NULL,
  co_advisor_ids uuid[] NOT NULL DEFAULT '{}',
  assigned_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX advisor_students_university_idx ON advisor_students (university_id, id);
CREATE INDEX advisor_students_student_idx ON advisor_students (student_id);

CREATE TABLE resumes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL REFERENCES students(id) ON DELETE CASCADE,
  title text NOT NULL,
  template_name text,
  content text NOT NULL,
  is_primary boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX resumes_university_idx ON resumes (university_id, id);
CREATE INDEX resumes_student_idx ON resumes (student_id);

CREATE TABLE student_profiles (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL UNIQUE REFERENCES students(id) ON DELETE CASCADE,
  headline text,
  summary text,
  skills text[] NOT NULL DEFAULT '{}',
  sections jsonb NOT NULL DEFAULT '[]',
  visibility text NOT NULL DEFAULT 'university',
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX student_profiles_university_idx ON student_profiles (university_id, id);

CREATE TABLE onboarding (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL UNIQUE REFERENCES students(id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('not_started', 'in_progress', 'completed')),
  steps_completed integer NOT NULL DEFAULT 0,
  steps_total integer NOT NULL,
  completed_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX onboarding_university_idx ON onboarding (university_id, id);

CREATE TABLE alumni (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  first_name text NOT NULL,
  last_name text NOT NULL,
  email text,
  graduation_year integer,
  degree text,
  employer text,
  job_title text,
  city text,
  linkedin_url text,
  open_to_mentoring boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alumni_university_idx ON alumni (university_id, id);

CREATE TABLE companies (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  name text NOT NULL,
  industry text,
  website text,
  size_band text,
  city text,
  country text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX companies_university_idx ON companies (university_id, id);

CREATE TABLE jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  company_id uuid REFERENCES companies(id),
  title text NOT NULL,
  description text NOT NULL,
  location text,
  employment_type text,
  remote boolean NOT NULL DEFAULT false,
  salary_min numeric(12, 2),
  salary_max numeric(12, 2),
  posted_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz
);
CREATE INDEX jobs_university_idx ON jobs (university_id, id);

CREATE TABLE events (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  campus_id uuid REFERENCES campuses(id),
  title text NOT NULL,
  kind text NOT NULL,
  starts_at timestamptz NOT NULL,
  ends_at timestamptz,
  location text,
  capacity integer,
  registrations_count integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_university_idx ON events (university_id, id);

CREATE TABLE student_engagement (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL UNIQUE REFERENCES students(id) ON DELETE CASCADE,
  last_active_at timestamptz,
  logins_30d integer NOT NULL DEFAULT 0,
  applications_total integer NOT NULL DEFAULT 0,
  events_attended_total integer NOT NULL DEFAULT 0,
  appointments_total integer NOT NULL DEFAULT 0,
  resume_count integer NOT NULL DEFAULT 0,
  profile_completeness integer NOT NULL DEFAULT 0 CHECK (profile_completeness BETWEEN 0 AND 100),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX student_engagement_university_idx ON student_engagement (university_id, id);

CREATE TABLE student_engagement_monthly (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  university_id uuid NOT NULL REFERENCES universities(id),
  student_id uuid NOT NULL REFERENCES students(id) ON DELETE CASCADE,
  month date NOT NULL CHECK (extract(day FROM month) = 1),
  logins integer NOT NULL DEFAULT 0,
  applications integer NOT NULL DEFAULT 0,
  events_attended integer NOT NULL DEFAULT 0,
  appointments integer NOT NULL DEFAULT 0,
  UNIQUE (student_id, month)
);
CREATE INDEX student_engagement_monthly_university_idx ON student_engagement_monthly (university_id, id);

-- Read shapes with derived columns. security_invoker keeps the underlying tables' policies in force.
CREATE VIEW students_read WITH (security_invoker = true) AS
SELECT s.id, s.university_id, s.cohort_id, s.email, s.first_name, s.last_name, s.external_id, s.phone,
       s.graduation_date, s.graduation_year, s.is_alumni, s.account_status,
       ARRAY(SELECT se.email FROM secondary_emails se WHERE se.student_id = s.id ORDER BY se.created_at, se.email) AS secondary_emails,
       s.created_at, s.updated_at
FROM students s;

CREATE VIEW cohorts_read WITH (security_invoker = true) AS
SELECT c.id, c.university_id, c.name, c.display_name, c.program, c.degree, c.start_date, c.end_date,
       c.intake_year, c.intake_term, c.campus_id,
       (SELECT cp.name FROM campuses cp WHERE cp.id = c.campus_id) AS campus_name,
       c.study_mode, c.resume_template_names,
       (SELECT count(*)::integer FROM students s WHERE s.cohort_id = c.id) AS student_count,
       c.created_at, c.updated_at
FROM cohorts c;

-- Row-level security: every tenant table, forced, one policy per role. The scope is read through
-- a scalar subquery so PostgreSQL evaluates it once per statement, not once per row.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['campuses', 'resume_templates', 'accounts', 'cohorts', 'students', 'secondary_emails',
    'alumni_flag_history', 'advisor_students', 'resumes', 'student_profiles', 'onboarding', 'alumni', 'companies',
    'jobs', 'events', 'student_engagement', 'student_engagement_monthly']
  LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant_scope ON %I TO pds_app USING (university_id = ANY ((SELECT pds_scope())::uuid[])) WITH CHECK (university_id = ANY ((SELECT pds_scope())::uuid[]))', t);
    EXECUTE format('CREATE POLICY operator_all ON %I TO pds_operator USING (true) WITH CHECK (true)', t);
  END LOOP;
END $$;

ALTER TABLE universities ENABLE ROW LEVEL SECURITY;
ALTER TABLE universities FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON universities TO pds_app USING (id = ANY ((SELECT pds_scope())::uuid[]));
CREATE POLICY operator_all ON universities TO pds_operator USING (true) WITH CHECK (true);

GRANT USAGE ON SCHEMA public TO pds_app, pds_operator;
GRANT SELECT ON universities, campuses, resume_templates, accounts, cohorts, students, secondary_emails,
  alumni_flag_history, advisor_students, resumes, student_profiles, onboarding, alumni, companies, jobs, events,
  student_engagement, student_engagement_monthly, students_read, cohorts_read TO pds_app;
GRANT INSERT, UPDATE ON accounts, cohorts, students, secondary_emails TO pds_app;
GRANT INSERT ON alumni_flag_history TO pds_app;
GRANT ALL ON ALL TABLES IN SCHEMA public TO pds_operator;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO pds_app, pds_operator;

-- Who holds each address across the whole service. Partners may not read other universities'
-- accounts, but a write must know whether an address is taken and by what kind of account,
-- so this answers only that, and only for the addresses asked about.
CREATE FUNCTION pds_email_owners(addresses text[])
RETURNS TABLE (email text, kind text, in_scope boolean, erased boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
  SELECT a.email, a.kind, coalesce(a.university_id = ANY (pds_scope()), false), false
  FROM unnest(addresses) AS x(address) JOIN accounts a ON a.email = x.address
  UNION ALL
  SELECT se.email, 'student', se.university_id = ANY (pds_scope()), false
  FROM unnest(addresses) AS x(address) JOIN secondary_emails se ON se.email = x.address
  UNION ALL
  SELECT x.address, 'student', coalesce(a.university_id = ANY (pds_scope()), false), true
  FROM unnest(addresses) AS x(address)
  JOIN accounts a ON a.erased_email_hash = encode(sha256(convert_to(x.address, 'UTF8')), 'hex')
$$;
ALTER FUNCTION pds_email_owners(text[]) OWNER TO pds_operator;
REVOKE ALL ON FUNCTION pds_email_owners(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pds_email_owners(text[]) TO pds_app;
