ALTER TABLE runtime_profiles DROP COLUMN acp_program;
