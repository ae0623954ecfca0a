ALTER TABLE sessions DROP COLUMN IF EXISTS resume_material;
ALTER TABLE inputs DROP COLUMN IF EXISTS delivered_runtime_generation;
