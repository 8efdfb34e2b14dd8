-- A campus is named once per university, as a résumé template is (001): cohort rows name their
-- campus (`campus_name`), and a second campus of the same name made that name bind silently to
-- one of them. The unique index serves the lookups the plain one did. A database holding
-- duplicates fails this migration with the duplicated key named; rename one of them first. One
-- block: Citus takes one DDL command per message on a distributed table (docs/scaling.md, rule 8).
DO $$
BEGIN
  CREATE UNIQUE INDEX campuses_name_key ON campuses (university_id, name);
  DROP INDEX campuses_university_name_idx;
END
$$;
