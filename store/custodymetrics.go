package store

import (
	"context"
	"time"
)

// Custody summarizes the inputs in the platform's custody (accepted, not yet admitted
// by a runtime) of Sessions open to delivery, for the custody metrics.
type Custody struct {
	// Held counts those inputs.
	Held int64
	// OldestAge is how long the oldest of them has waited (0 when none is held),
	// measured on the database's clock, which also stamped accepted_at.
	OldestAge time.Duration
}

// GetCustody returns the custody summary. Terminated, archived and deleted Sessions
// are left out: their held inputs wait for a recover, not for a runtime, and would
// hold the age up for ever. The scan runs on the partial index of held inputs.
func (s *Store) GetCustody(ctx context.Context) (Custody, error) {
	var row struct {
		Held       int64
		OldestSecs float64
	}
	err := scanRaw(s.conn(ctx), &row, `
		SELECT count(*) AS held,
		       COALESCE(EXTRACT(EPOCH FROM now() - min(i.accepted_at)), 0)::float8 AS oldest_secs
		FROM inputs i
		JOIN sessions s ON s.id = i.session_id
		WHERE i.state IN (?, ?)
		  AND s.archived_at IS NULL AND s.deleted_at IS NULL AND s.lifecycle <> ?`,
		InputPending, InputDelivered, LifecycleTerminated)
	if err != nil {
		return Custody{}, mapError("get custody", err)
	}
	return Custody{Held: row.Held, OldestAge: time.Duration(row.OldestSecs * float64(time.Second))}, nil
}
