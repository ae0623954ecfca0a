-- Child runs keyed by their public id. The Relay records the children an Agent program
-- reports through data-subagent parts, which carry only the public id (minted from the
-- native reference inside the adapter): the native reference never reaches the
-- platform, so it becomes optional. NULLs are distinct, so UNIQUE (session_id,
-- native_ref) still keeps one row per native reference where one is known.
ALTER TABLE child_runs ALTER COLUMN native_ref DROP NOT NULL;

-- The rest of a data-subagent run report: the program's kind of child agent and the
-- tool call that started the child.
ALTER TABLE child_runs ADD COLUMN agent_type text NOT NULL DEFAULT '';
ALTER TABLE child_runs ADD COLUMN parent_tool_call_id text;
