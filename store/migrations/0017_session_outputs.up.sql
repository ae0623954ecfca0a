-- A Session's output position, off the Session's row. Every Relay batch advanced
-- output_seq on the sessions row, and an input's receipt advances input_seq on the
-- same row, so a receipt waited on the row lock of whichever Relay write held it: a
-- group of batches with facts holds its locks across two round trips, and under load
-- a receipt waited 50-160 ms on it. Every writer of a Session's output holds the
-- Session's reader lease first (the fence), which already orders the seqs; the
-- position now lives in a row only those writers update, and a receipt only reads it.
-- Each Session has its row from its creation.
CREATE TABLE session_outputs (
    session_id     uuid PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    -- output_seq is the highest seq in output_parts (0 before any output): the
    -- position a follower streams from. The next part gets output_seq + 1.
    output_seq     bigint NOT NULL DEFAULT 0 CHECK (output_seq >= 0),
    last_output_at timestamptz
);

INSERT INTO session_outputs (session_id, output_seq, last_output_at)
SELECT id, output_seq, last_output_at FROM sessions;

ALTER TABLE sessions DROP COLUMN output_seq, DROP COLUMN last_output_at;
