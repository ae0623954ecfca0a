-- Earlier history imported from another system, for reading only: an import starts no
-- sandbox, runs nothing and changes no Session state. position orders the imported
-- messages before anything the conversation itself records; source_id is the message's
-- identity in the old system, and content_hash lets a repeated import be recognised.
CREATE TABLE imported_messages (
    session_id       uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position         integer NOT NULL CHECK (position >= 1),
    source_id        text NOT NULL CHECK (source_id <> ''),
    role             text NOT NULL CHECK (role IN ('user', 'assistant')),
    source_created_at timestamptz NOT NULL,
    completion       text CHECK (completion IN ('completed', 'failed', 'cancelled', 'unknown')),
    parent_source_id text,
    blocks           jsonb NOT NULL CHECK (jsonb_typeof(blocks) = 'array'),
    content_hash     bytea NOT NULL CHECK (octet_length(content_hash) = 32),
    imported_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    imported_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, position),
    UNIQUE (session_id, source_id),
    CHECK ((role = 'assistant') = (completion IS NOT NULL))
);
