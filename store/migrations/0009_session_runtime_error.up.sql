-- Why the platform could not start a Session's Agent program (a required command
-- missing from the image, ...), shown on the Session; cleared when a runtime starts.
ALTER TABLE sessions ADD COLUMN runtime_error text;
