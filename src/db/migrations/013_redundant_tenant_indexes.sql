-- Three indexes on the tenant column alone (001) that an index led by it serves as well since
-- 012: accounts (university_id, email), alumni_flag_history (university_id, student_id, id),
-- secondary_emails (university_id, email). Each cost every insert of a batch one more index
-- entry and found nothing the others do not. One block: Citus takes one DDL command per message
-- on a distributed table (docs/scaling.md, rule 8).
DO $$
BEGIN
  DROP INDEX accounts_university_idx;
  DROP INDEX alumni_flag_history_university_idx;
  DROP INDEX secondary_emails_university_idx;
END
$$;
