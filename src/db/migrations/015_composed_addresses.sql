-- Addresses are compared and stored with their accents composed, Unicode's NFC (emailKey,
-- src/domain/email-register.ts): `é` sent as `e` and a combining accent had been stored as sent,
-- which the composed spelling, the same address, did not find. As in 014, each stored address
-- not in NFC is rewritten where it is stored and its register entry re-keyed, unless its
-- composed form is held already (two accounts hold one address, which only the operator can
-- resolve); an erased address is kept as its hash alone, which cannot be re-keyed.
DO $$
DECLARE
  stored text;
  composed text;
  stored_hash text;
  composed_hash text;
BEGIN
  FOR stored IN
    SELECT email FROM accounts WHERE email IS NOT NFC NORMALIZED
    UNION
    SELECT email FROM secondary_emails WHERE email IS NOT NFC NORMALIZED
  LOOP
    composed := normalize(stored, NFC);
    stored_hash := encode(sha256(convert_to(stored, 'UTF8')), 'hex');
    composed_hash := encode(sha256(convert_to(composed, 'UTF8')), 'hex');
    CONTINUE WHEN EXISTS (SELECT 1 FROM email_register WHERE email_hash = composed_hash);
    UPDATE accounts SET email = composed WHERE email = stored;
    UPDATE students SET email = composed WHERE email = stored;
    UPDATE secondary_emails SET email = composed WHERE email = stored;
    INSERT INTO email_register (email_hash, kind, university_id, erased, created_at)
    SELECT composed_hash, kind, university_id, erased, created_at FROM email_register WHERE email_hash = stored_hash;
    DELETE FROM email_register WHERE email_hash = stored_hash;
  END LOOP;
END
$$;
