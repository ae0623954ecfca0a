ALTER TABLE sessions
    ADD COLUMN output_seq bigint NOT NULL DEFAULT 0 CHECK (output_seq >= 0),
    ADD COLUMN last_output_at timestamptz;

UPDATE sessions s SET output_seq = o.output_seq, last_output_at = o.last_output_at
FROM session_outputs o WHERE o.session_id = s.id;

DROP TABLE session_outputs;
