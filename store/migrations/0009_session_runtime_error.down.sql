ALTER TABLE sessions DROP COLUMN runtime_error;
