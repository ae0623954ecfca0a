-- Imported history: messages an administrator brought from another system, read-only.
-- position keeps conversation order; source_id is the message's identity in the old
-- system; content_sha256 lets a repeated import prove it carries the same content.
CREATE TABLE imported_messages (
    session_id       uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position         integer NOT NULL CHECK (position >= 1),
    source_id        text NOT NULL CHECK (source_id <> ''),
    role             text NOT NULL CHECK (role IN ('user', 'assistant')),
    created_at       timestamptz NOT NULL,
    blocks           jsonb NOT NULL CHECK (jsonb_typeof(blocks) = 'array'),
    completion       text CHECK (completion IN ('completed', 'failed', 'cancelled', 'unknown')),
    parent_source_id text,
    content_sha256   bytea NOT NULL CHECK (octet_length(content_sha256) = 32),
    imported_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, position),
    UNIQUE (session_id, source_id),
    -- A reply records how it ended; a user message has no completion.
    CHECK ((role = 'assistant') = (completion IS NOT NULL))
);

-- Read-only share links of a Session. Like API tokens, the link's secret is stored
-- only as its SHA-256.
CREATE TABLE session_shares (
    id             uuid PRIMARY KEY,
    session_id     uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    token_hash     bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    allow_download boolean NOT NULL DEFAULT false,
    created_by     uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz
);
CREATE INDEX session_shares_session_idx ON session_shares (session_id);
