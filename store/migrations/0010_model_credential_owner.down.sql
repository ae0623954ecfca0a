ALTER TABLE sessions DROP COLUMN model_credential_owner;
