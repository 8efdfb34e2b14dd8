-- University names and short names are no longer unique (docs/decisions.md, Operator API):
-- the contract's create answers 201 with the created object and names no conflict, so a second
-- university of the same name is the operator's to create, not a 409.
-- One DO block, one message: Citus refuses several DDL statements in one message on distributed tables.
DO $$
BEGIN
  DROP INDEX IF EXISTS universities_name_key;
  DROP INDEX IF EXISTS universities_short_name_key;
END
$$;
