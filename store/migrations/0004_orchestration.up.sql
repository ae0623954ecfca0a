-- Session orchestration: which runtime an input was handed to, and the adapter's
-- resume material for attaching a replacement runtime to the same conversation.

-- delivered_runtime_generation names the runtime (sessions.runtime_generation) that
-- received a delivered input. An unadmitted input is handed again only to a runtime of
-- a later generation (a replacement), never twice to the same one.
ALTER TABLE inputs ADD COLUMN delivered_runtime_generation bigint;

-- resume_material is SessionRuntime.ResumeMaterial from the last activation, handed
-- back to the adapter on attach. AstraBox never interprets it.
ALTER TABLE sessions ADD COLUMN resume_material bytea;
