-- The model credential delivery owner the Session's current runtime was placed with,
-- as the deployment's runtime preparation integration declared it (NULL: none). A
-- running runtime cannot take another owner: when the declared owner differs at the
-- next connection, the runtime is replaced instead of reattached.
ALTER TABLE sessions ADD COLUMN model_credential_owner text;
