ALTER TABLE users DROP COLUMN disabled_at;
