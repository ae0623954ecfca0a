DROP INDEX IF EXISTS inputs_pending_accepted_idx;
