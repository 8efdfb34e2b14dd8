-- Idempotency keys of writes (src/domain/idempotency-keys.ts, docs/api.md "Idempotency keys"):
-- one row per key a write token sent, scoped to the token's university. A row is first a claim
-- (a running write holds it until lease_expires_at), then the answer the write gave, which a
-- repeat of the same request gets back. Rows are purged once created_at is a day old.
-- Timestamps come from the application as parameters; nothing here calls now() on a row.
CREATE TABLE idempotency_keys (
  -- No foreign key: row-level security's WITH CHECK binds the row to the token's university,
  -- and a key outlives neither its day nor its token's usefulness.
  university_id uuid NOT NULL,
  token_id uuid NOT NULL,
  key text NOT NULL,
  -- SHA-256 (hex) of the method, resource, Prefer header and canonical JSON body.
  request_hash text NOT NULL,
  -- Who holds the claim: a write completes or releases the key only under its own claim, so a
  -- write that outlived its lease and was taken over can no longer store an answer.
  claim_id uuid NOT NULL,
  lease_expires_at timestamptz NOT NULL,
  -- Null while the write runs; the stored answer once it was processed.
  response_status integer,
  response_headers jsonb,
  response_body text,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (university_id, token_id, key),
  CHECK ((response_status IS NULL) = (response_body IS NULL) AND (response_status IS NULL) = (response_headers IS NULL))
);
-- The periodic purge deletes by age across universities.
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- The scope is read without a subquery: Citus refuses subqueries in policies of distributed tables.
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON idempotency_keys TO pds_app
  USING (university_id = ANY (pds_scope())) WITH CHECK (university_id = ANY (pds_scope()));
CREATE POLICY operator_all ON idempotency_keys TO pds_operator USING (true) WITH CHECK (true);
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO pds_app;
GRANT ALL ON idempotency_keys TO pds_operator;

-- On Citus: distributed by university and co-located with the other tenant tables (with `tenants`),
-- so that a keyed write's claim, batch and stored answer all run on the university's shard.
DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN PERFORM
  create_distributed_table('idempotency_keys', 'university_id', colocate_with => 'tenants'); END IF;
END $$;
