-- The reader lease generation whose Relay hands the Session's new inputs to its
-- runtime on PostgreSQL's notice. While that lease is unexpired an accepted input
-- needs no workflow signal: the API reads this in the statement that accepts the
-- input, under the Session's row lock. A new lease generation voids it; releasing
-- the runtime clears it.
ALTER TABLE sessions ADD COLUMN inputs_on_notice_lease bigint;
