-- Addresses are compared and stored with Greek's final sigma as σ (emailKey,
-- src/domain/email-register.ts); lower-casing had stored `ΝΙΚΟΣ@` as `νικος@`, which `νικοσ@`,
-- the same address, did not find. Each stored address holding ς is rewritten where it is stored
-- and its register entry re-keyed, unless its folded form is held already: then two accounts hold
-- one address, which only the operator can resolve, and both are left as they are. An erased
-- address is kept as its hash alone, which cannot be re-keyed.
DO $$
DECLARE
  stored text;
  folded text;
  stored_hash text;
  folded_hash text;
BEGIN
  FOR stored IN
    SELECT email FROM accounts WHERE strpos(email, 'ς') > 0
    UNION
    SELECT email FROM secondary_emails WHERE strpos(email, 'ς') > 0
  LOOP
    folded := replace(stored, 'ς', 'σ');
    stored_hash := encode(sha256(convert_to(stored, 'UTF8')), 'hex');
    folded_hash := encode(sha256(convert_to(folded, 'UTF8')), 'hex');
    CONTINUE WHEN EXISTS (SELECT 1 FROM email_register WHERE email_hash = folded_hash);
    UPDATE accounts SET email = folded WHERE email = stored;
    UPDATE students SET email = folded WHERE email = stored;
    UPDATE secondary_emails SET email = folded WHERE email = stored;
    INSERT INTO email_register (email_hash, kind, university_id, erased, created_at)
    SELECT folded_hash, kind, university_id, erased, created_at FROM email_register WHERE email_hash = stored_hash;
    DELETE FROM email_register WHERE email_hash = stored_hash;
  END LOOP;
END
$$;
