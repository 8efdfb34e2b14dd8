-- When a token was last used, kept coarsely: each instance records a token's use at most once a
-- minute (src/domain/tokens.ts), and the update itself skips a row recorded within the minute,
-- so several instances together still write about once a minute per token at most.
ALTER TABLE tokens ADD COLUMN last_used_at timestamptz;

-- The operator API pages through accounts (every student has one) oldest first, keyed by
-- (created_at, id), in all or within one university (src/domain/operator-records.ts).
CREATE INDEX accounts_created_idx ON accounts (created_at, id);
CREATE INDEX accounts_university_created_idx ON accounts (university_id, created_at, id);
