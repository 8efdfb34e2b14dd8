-- A university is onboarded once: its name, and its short_name when it has one, are unique,
-- compared case-insensitively and without surrounding spaces. A database holding duplicates
-- fails this migration with the duplicated key named; merge or rename them first.
CREATE UNIQUE INDEX universities_name_key ON universities (lower(btrim(name)));
CREATE UNIQUE INDEX universities_short_name_key ON universities (lower(btrim(short_name))) WHERE short_name IS NOT NULL;
