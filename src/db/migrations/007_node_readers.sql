-- Reader sessions on a Citus node hold a partner's scope as session state, which Citus does not
-- carry to other nodes. They run as pds_reader: pds_app's grants and policies, and no login
-- (never given one, unlike pds_app on Citus), so a read that Citus would run on another node
-- fails to connect there instead of answering without its scope (src/db/postgres-store.ts,
-- NODE_READER_ROLE). Created everywhere, one schema for every store; used on Citus only.
DO $$ BEGIN CREATE ROLE pds_reader NOLOGIN NOBYPASSRLS;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
GRANT pds_app TO pds_reader;
DO $$ BEGIN EXECUTE format('GRANT pds_reader TO %I', current_user); END $$;
