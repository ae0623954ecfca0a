-- AstraBox's first schema. Every closed vocabulary is a CHECK constraint; every
-- idempotent write has the UNIQUE constraint it relies on (DESIGN.md, Invariants).

-- People and their API tokens. A token is stored only as the SHA-256 of its
-- high-entropy plaintext; the prefix is the plaintext's public beginning, shown to
-- people and used to find a token without its secret.
CREATE TABLE users (
    id           uuid PRIMARY KEY,
    email        text NOT NULL CHECK (email <> ''),
    display_name text NOT NULL DEFAULT '',
    role         text NOT NULL DEFAULT 'member' CHECK (role IN ('member', 'admin')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    prefix       text NOT NULL UNIQUE CHECK (prefix <> ''),
    token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_user_id_idx ON api_tokens (user_id);

-- RuntimeProfiles: the sandbox an Agent program runs in. engine_kind names an
-- installed adapter; the registry validates it at start-up, so it is not a CHECK here.
CREATE TABLE runtime_profiles (
    id              uuid PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (name <> ''),
    engine_kind     text NOT NULL CHECK (engine_kind ~ '^[a-z][a-z0-9_-]*$'),
    image           text NOT NULL DEFAULT '',
    enabled         boolean NOT NULL DEFAULT true,
    sandbox_backend text NOT NULL CHECK (sandbox_backend IN ('local', 'opensandbox', 'kubernetes')),
    sandbox_tenancy text NOT NULL DEFAULT 'conversation' CHECK (sandbox_tenancy IN ('conversation', 'shared')),
    resources       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(resources) = 'object'),
    network_policy  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(network_policy) = 'object'),
    tracing         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(tracing) = 'object'),
    prewarm_size    integer NOT NULL DEFAULT 0 CHECK (prewarm_size >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, engine_kind)
);

-- Agents. version detects concurrent updates (optimistic concurrency); it is not a
-- configuration a Session pins. permission_mode is in the engine's own vocabulary.
CREATE TABLE agents (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL UNIQUE CHECK (name <> ''),
    description        text NOT NULL DEFAULT '',
    engine_kind        text NOT NULL CHECK (engine_kind ~ '^[a-z][a-z0-9_-]*$'),
    runtime_profile_id uuid NOT NULL,
    config             jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
    permission_mode    text,
    created_by         uuid REFERENCES users (id) ON DELETE SET NULL,
    version            bigint NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    -- An Agent runs the Agent program its RuntimeProfile selects.
    FOREIGN KEY (runtime_profile_id, engine_kind) REFERENCES runtime_profiles (id, engine_kind)
);
CREATE INDEX agents_runtime_profile_id_idx ON agents (runtime_profile_id);

-- Sessions. READY / PROCESSING / WAITING_INPUT are derived (runtime_status, open
-- responses and interactions, held inputs) and never stored; lifecycle keeps only
-- what cannot be derived: creating, active, terminated, deleted.
CREATE TABLE sessions (
    id                   uuid PRIMARY KEY,
    agent_id             uuid NOT NULL REFERENCES agents (id),
    user_id              uuid NOT NULL REFERENCES users (id),
    kind                 text NOT NULL DEFAULT 'agent_chat' CHECK (kind IN ('agent_chat', 'assistant_chat')),
    title                text CHECK (title IS NULL OR (char_length(title) BETWEEN 1 AND 200 AND title !~ '[\r\n]')),
    title_source         text CHECK (title_source IN ('user', 'auto')),
    permission_mode      text,
    lifecycle            text NOT NULL DEFAULT 'creating' CHECK (lifecycle IN ('creating', 'active', 'terminated', 'deleted')),
    runtime_status       text CHECK (runtime_status IN ('idle', 'working', 'waiting')),
    runtime_unavailable  boolean NOT NULL DEFAULT false,
    archived_at          timestamptz,
    deleted_at           timestamptz,
    -- Placement: where the live runtime is. runtime_generation counts the runtimes
    -- the platform has placed for this Session.
    engine_session_key   text,
    sandbox_id           text,
    host_task_queue      text,
    runtime_generation   bigint NOT NULL DEFAULT 0 CHECK (runtime_generation >= 0),
    runtime_info         jsonb,
    model_name           text,
    -- output_seq is the highest seq in output_parts (0 before any output): the
    -- position a follower streams from. The next part gets output_seq + 1.
    output_seq           bigint NOT NULL DEFAULT 0 CHECK (output_seq >= 0),
    -- input_seq is the highest accepted-order number given to an input.
    input_seq            bigint NOT NULL DEFAULT 0 CHECK (input_seq >= 0),
    last_output_at       timestamptz,
    read_at              timestamptz,
    -- The list's ordering key: moves on creation and when a response ends, not on rename.
    last_activity_at     timestamptz NOT NULL DEFAULT now(),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK ((title IS NULL) = (title_source IS NULL)),
    CHECK ((lifecycle = 'deleted') = (deleted_at IS NOT NULL))
);
CREATE INDEX sessions_user_list_idx ON sessions (user_id, last_activity_at DESC, id) WHERE deleted_at IS NULL;
CREATE INDEX sessions_agent_id_idx ON sessions (agent_id);

-- Idempotency-Key on Session creation: the same key for the same user and Agent
-- names the same Session. The foreign key is deferred so the key row can be claimed
-- first, before the Session row exists, in one transaction.
CREATE TABLE session_idempotency_keys (
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_id   uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    key        text NOT NULL CHECK (key <> ''),
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, agent_id, key)
);

-- Inputs: custody of a person's messages. seq is the accepted order within the
-- Session. A pending row may already have reached the runtime; it is never withdrawn.
CREATE TABLE inputs (
    id                uuid PRIMARY KEY,
    session_id        uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq               bigint NOT NULL CHECK (seq >= 1),
    client_message_id text CHECK (client_message_id <> ''),
    content           text NOT NULL,
    state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'admitted', 'failed')),
    failure_code      text,
    failure_message   text,
    accepted_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at      timestamptz,
    admitted_at       timestamptz,
    failed_at         timestamptz,
    UNIQUE (session_id, seq),
    CHECK ((state = 'failed') = (failure_code IS NOT NULL)),
    CHECK (state <> 'admitted' OR admitted_at IS NOT NULL)
);
CREATE UNIQUE INDEX inputs_client_message_id_key ON inputs (session_id, client_message_id) WHERE client_message_id IS NOT NULL;
CREATE INDEX inputs_held_idx ON inputs (session_id, seq) WHERE state IN ('pending', 'delivered');

-- Responses as the runtime reported them. An open response has no outcome yet; it
-- ends only on the runtime's signal or on reconciliation (failed, runtime_lost).
CREATE TABLE responses (
    session_id    uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    response_id   text NOT NULL CHECK (response_id <> ''),
    origin        text NOT NULL CHECK (origin IN ('input', 'engine')),
    input_ids     jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(input_ids) = 'array'),
    outcome       text CHECK (outcome IN ('completed', 'failed', 'cancelled')),
    native_reason text,
    usage         jsonb,
    error         jsonb,
    started_seq   bigint NOT NULL CHECK (started_seq >= 1),
    ended_seq     bigint CHECK (ended_seq >= started_seq),
    started_at    timestamptz NOT NULL DEFAULT now(),
    ended_at      timestamptz,
    PRIMARY KEY (session_id, response_id),
    CHECK ((outcome IS NULL) = (ended_at IS NULL)),
    CHECK ((outcome IS NULL) = (ended_seq IS NULL))
);
CREATE INDEX responses_open_idx ON responses (session_id) WHERE outcome IS NULL;
CREATE INDEX responses_ended_idx ON responses (session_id, ended_seq DESC) WHERE outcome IS NOT NULL;

-- The output log: browser parts numbered per Session without gaps. It is the
-- stream's and the history's only source.
CREATE TABLE output_parts (
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq >= 1),
    response_id text,
    frame       jsonb NOT NULL CHECK (jsonb_typeof(frame) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX output_parts_response_idx ON output_parts (session_id, response_id, seq) WHERE response_id IS NOT NULL;

-- Interactions: approvals and questions a response waits on. An answer saved here is
-- not acceptance by the runtime: the row stays open until the runtime closes it.
CREATE TABLE interactions (
    session_id     uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    interaction_id text NOT NULL CHECK (interaction_id <> ''),
    response_id    text,
    contract       jsonb NOT NULL CHECK (jsonb_typeof(contract) = 'object'),
    state          text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'answered', 'withdrawn', 'expired')),
    answer         jsonb,
    answered_by    uuid REFERENCES users (id) ON DELETE SET NULL,
    answer_saved_at timestamptz,
    closure_reason text,
    opened_at      timestamptz NOT NULL DEFAULT now(),
    closed_at      timestamptz,
    PRIMARY KEY (session_id, interaction_id),
    CHECK ((state = 'open') = (closed_at IS NULL))
);
CREATE INDEX interactions_open_idx ON interactions (session_id) WHERE state = 'open';

-- The reader lease: exactly one Relay reads a Session's runtime. Every write of a
-- Relay is fenced by generation, which each acquisition increases.
CREATE TABLE reader_leases (
    session_id  uuid PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    holder      text NOT NULL CHECK (holder <> ''),
    generation  bigint NOT NULL CHECK (generation >= 1),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- The runtime cursor, committed in the same transaction as the parts it produced.
-- generation is the runtime's own incarnation name; position is opaque JSON.
CREATE TABLE runtime_cursors (
    session_id       uuid PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    generation       text NOT NULL,
    position         jsonb NOT NULL,
    through_seq      bigint NOT NULL CHECK (through_seq >= 0),
    lease_generation bigint NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Child runs an Agent program delegated to. The public id is minted from the native
-- reference, which stays private; status is the engine's own word.
CREATE TABLE child_runs (
    id          text PRIMARY KEY CHECK (id <> ''),
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    native_ref  text NOT NULL CHECK (native_ref <> ''),
    parent_id   text REFERENCES child_runs (id) ON DELETE CASCADE,
    response_id text,
    name        text NOT NULL DEFAULT '',
    status      text NOT NULL,
    usage       jsonb,
    control_ref text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, native_ref)
);
CREATE INDEX child_runs_parent_idx ON child_runs (parent_id) WHERE parent_id IS NOT NULL;

-- Native session data kept outside replaceable sandboxes. session_log_entries mirrors
-- an engine's JSONL conversation log entry by entry, in order, uninterpreted.
CREATE TABLE session_log_entries (
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    stream     text NOT NULL CHECK (stream <> ''),
    entry_seq  bigint NOT NULL CHECK (entry_seq >= 1),
    entry      jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, stream, entry_seq)
);

-- Opaque native runtime state (engines with another format than a JSONL log). The
-- owner is a Session or a workspace, as the engine's runtime_state_scope declares.
CREATE TABLE runtime_state_blobs (
    scope      text NOT NULL CHECK (scope IN ('session', 'workspace')),
    owner_id   text NOT NULL CHECK (owner_id <> ''),
    name       text NOT NULL CHECK (name <> ''),
    generation bigint NOT NULL DEFAULT 1 CHECK (generation >= 1),
    data       bytea NOT NULL,
    sha256     bytea NOT NULL CHECK (octet_length(sha256) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, owner_id, name)
);
