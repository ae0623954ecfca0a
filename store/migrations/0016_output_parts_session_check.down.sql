DROP TRIGGER IF EXISTS sessions_delete_output_parts ON sessions;
DROP FUNCTION IF EXISTS delete_session_output_parts();
ALTER TABLE output_parts ADD CONSTRAINT output_parts_session_id_fkey
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
