-- 014 and 015 rewrote stored addresses (ς as σ, accents composed) without a change number, so the
-- change feed never carried them: a partner's mirror kept the old spelling of the address (or of
-- a secondary_emails entry) for good, and `updated_at=gt.` missed them too. Every student whose
-- address or secondary address is not ASCII, the only ones those two could rewrite, is stamped
-- with its university's next change number and a new updated_at, so that each mirror reads it
-- again. A student they left as it was is read again unchanged, which a mirror takes as any
-- update. A later migration that rewrites what a read shows stamps what it rewrites itself.
DO $$
DECLARE
  university uuid;
  seq bigint;
BEGIN
  FOR university IN
    SELECT university_id FROM students WHERE octet_length(email) > length(email)
    UNION
    SELECT university_id FROM secondary_emails WHERE octet_length(email) > length(email)
  LOOP
    INSERT INTO tenants (university_id, change_seq) VALUES (university, 1)
      ON CONFLICT (university_id) DO UPDATE SET change_seq = tenants.change_seq + 1
      RETURNING change_seq INTO seq;
    UPDATE students SET change_seq = seq, updated_at = now()
      WHERE university_id = university
        AND (octet_length(email) > length(email)
          OR id IN (SELECT student_id FROM secondary_emails WHERE university_id = university AND octet_length(email) > length(email)));
  END LOOP;
END
$$;
