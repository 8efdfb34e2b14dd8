-- The address register is read and claimed by one university's writes (pds_tenant, through its
-- twins of these policies from 009) and by the operator; never by a partner's read. pds_app, the
-- role partner reads run as (and pds_reader, a member of it, on Citus nodes), could read every
-- entry (USING (true)): the unsalted hash of each address in the service, with its kind and its
-- university, there for a query-compiler bug to expose. Partner reads keep no access to it.
-- One DO block, one message: Citus refuses several DDL statements in one message on distributed tables.
DO $$
BEGIN
  REVOKE SELECT, INSERT ON email_register FROM pds_app;
  DROP POLICY register_read ON email_register;
  DROP POLICY register_claim ON email_register;
END
$$;
