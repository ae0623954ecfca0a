-- A disabled user keeps their Sessions and records but can no longer authenticate:
-- every token of theirs stops working at once, and so do the share links of their
-- Sessions. Re-enabling restores the tokens that are neither revoked nor expired.
ALTER TABLE users ADD COLUMN disabled_at timestamptz;
