package store

import (
	"context"
	"time"
)

// UnclaimedInputs names a Session holding inputs that no runtime has picked up: the
// oldest such input and how many there are.
type UnclaimedInputs struct {
	SessionID string
	// OldestInputID is the earliest pending input, the one the re-sent signal names.
	OldestInputID string
	// OldestAcceptedAt is when that input was accepted.
	OldestAcceptedAt time.Time
	// Pending counts the Session's pending inputs accepted before the cutoff.
	Pending int
}

// ListSessionsWithUnclaimedInputs returns at most limit Sessions, oldest first, that
// hold a pending input accepted before acceptedBefore and are still open to delivery:
// neither archived, deleted nor terminated (a terminated Session waits for a recover,
// which hands its held inputs over). The signal that tells a Session's workflow about
// an input is a hint and may have been lost (Temporal unreachable); these rows are
// what the worker's sweep signals again. The scan runs on inputs_pending_accepted_idx;
// the state is written as the literal of the index's predicate (store.InputPending), so
// the planner matches the partial index under a generic plan too.
func (s *Store) ListSessionsWithUnclaimedInputs(ctx context.Context, acceptedBefore time.Time, limit int) ([]UnclaimedInputs, error) {
	var out []UnclaimedInputs
	err := scanRaw(s.conn(ctx), &out, `
		SELECT i.session_id,
		       (array_agg(i.id ORDER BY i.seq))[1] AS oldest_input_id,
		       min(i.accepted_at) AS oldest_accepted_at,
		       count(*) AS pending
		FROM inputs i
		JOIN sessions s ON s.id = i.session_id
		WHERE i.state = 'pending' AND i.accepted_at < ?
		  AND s.archived_at IS NULL AND s.deleted_at IS NULL AND s.lifecycle <> ?
		GROUP BY i.session_id
		ORDER BY oldest_accepted_at, i.session_id
		LIMIT ?`, acceptedBefore, LifecycleTerminated, limit)
	return out, mapError("list sessions with unclaimed inputs", err)
}
