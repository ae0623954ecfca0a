-- The output log's foreign key to sessions checked every part as it was inserted: a
-- trigger query and a row lock on its Session per row, a fifth of PostgreSQL's CPU per
-- part under load. Every statement that appends parts takes their seqs from the
-- Session's row, which it updates (locked) in the same statement, so no part can name a
-- Session that does not exist; the key's one other duty, removing a deleted Session's
-- parts, is kept by a trigger on sessions.
ALTER TABLE output_parts DROP CONSTRAINT output_parts_session_id_fkey;

CREATE FUNCTION delete_session_output_parts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM output_parts WHERE session_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_delete_output_parts AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION delete_session_output_parts();
