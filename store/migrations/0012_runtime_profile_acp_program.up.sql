-- A RuntimeProfile of the generic ACP kind defines its Agent program itself: the
-- acp_program document (engines/acp.Program), validated by the API when saved. NULL
-- on every other profile: their program is installed with the platform.
ALTER TABLE runtime_profiles ADD COLUMN acp_program jsonb
    CONSTRAINT runtime_profiles_acp_program_object CHECK (acp_program IS NULL OR jsonb_typeof(acp_program) = 'object');
