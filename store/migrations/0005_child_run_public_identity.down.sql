ALTER TABLE child_runs DROP COLUMN IF EXISTS parent_tool_call_id;
ALTER TABLE child_runs DROP COLUMN IF EXISTS agent_type;
-- Rows known only by their public id cannot satisfy NOT NULL again; they go (their
-- children with them, by the parent_id cascade).
DELETE FROM child_runs WHERE native_ref IS NULL;
ALTER TABLE child_runs ALTER COLUMN native_ref SET NOT NULL;
