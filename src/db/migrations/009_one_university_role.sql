-- A partner's write transaction, always of one university, runs as pds_tenant, bound by
-- `university_id = pds_university()`, where pds_app is bound by `university_id = ANY
-- (pds_scope())` (Database.asUniversity in src/db/database.ts; reads keep pds_app). The planner
-- cannot see how many universities that array holds and takes 10: every index condition on the
-- tenant key then counts ten descents per key, and a batch's lookup of 500 students by address
-- was costed as 5,000 descents, so a large university was scanned whole instead (35,000
-- students: 12–16 ms against 2–3.5 by key; src/writes/student-store.ts). An equality on one
-- value is costed as one, and its estimate is the university's own.
--
-- pds_tenant has pds_app's grants and a twin of each of its policies, with the one university in
-- place of the scope's list; it is not a member of pds_app, whose policies would otherwise apply
-- too, joined by OR. A later migration that grants pds_app or gives it a policy does the same for
-- pds_tenant (test/migrate.test.ts checks that the two agree).
DO $$ BEGIN CREATE ROLE pds_tenant NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
DO $$ BEGIN EXECUTE format('GRANT pds_tenant TO %I', current_user); END $$;

-- The one university of the transaction, set with its scope; null (no rows) when unset.
CREATE FUNCTION pds_university() RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT nullif(current_setting('pds.university', true), '')::uuid
$$;

-- One DO block, one message: Citus refuses several DDL statements in one message on distributed tables.
DO $$
DECLARE
  grant_row record;
  policy_row record;
BEGIN
  -- On Citus the coordinator connects to the workers as the role a statement runs as (as
  -- pds_app and pds_operator in 004_sharding.sql).
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
    AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pds_tenant' AND NOT rolcanlogin) THEN
    ALTER ROLE pds_tenant LOGIN;
  END IF;
  GRANT USAGE ON SCHEMA public TO pds_tenant;
  -- Tables, views and sequences, from the catalog: whoever granted them (information_schema
  -- shows only what concerns the current user's roles).
  FOR grant_row IN SELECT c.relname, c.relkind, a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.relnamespace = 'public'::regnamespace AND a.grantee = 'pds_app'::regrole
  LOOP
    EXECUTE format('GRANT %s ON %s %I TO pds_tenant', grant_row.privilege_type,
      CASE WHEN grant_row.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, grant_row.relname);
  END LOOP;
  FOR policy_row IN SELECT tablename, policyname, permissive, cmd, qual, with_check FROM pg_policies
    WHERE schemaname = 'public' AND roles = '{pds_app}'
  LOOP
    EXECUTE format('CREATE POLICY %I ON %I AS %s FOR %s TO pds_tenant',
        policy_row.policyname || '_one', policy_row.tablename, policy_row.permissive, policy_row.cmd)
      || coalesce(' USING (' || replace(policy_row.qual, '= ANY (pds_scope())', '= pds_university()') || ')', '')
      || coalesce(' WITH CHECK (' || replace(policy_row.with_check, '= ANY (pds_scope())', '= pds_university()') || ')', '');
  END LOOP;
END $$;
