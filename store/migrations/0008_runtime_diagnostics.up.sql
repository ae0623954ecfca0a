-- Runtime diagnostics: raw vendor evidence a Session's Agent program produced that
-- the platform does not translate (an unparsed line, a control response), kept for
-- operators and never shown in a browser stream. Bounded per Session: the Relay drops
-- the oldest when it stores one past the limit.
CREATE TABLE runtime_diagnostics (
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         bigint NOT NULL,
    event_type  text NOT NULL,
    raw         jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
