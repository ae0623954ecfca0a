-- The worker's re-signal sweep looks for inputs still pending after a grace period
-- (their signal to the Session's workflow may have been lost). Pending rows are few
-- at any time, so a partial index on accepted_at keeps the sweep a short index scan.
CREATE INDEX inputs_pending_accepted_idx ON inputs (accepted_at) WHERE state = 'pending';
