package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// LeaseRequest asks for a Session's reader lease.
type LeaseRequest struct {
	SessionID string
	// Holder names the reader (worker host and activity attempt), for operators.
	Holder string
	// TTL is how long the lease lasts without renewal.
	TTL time.Duration
	// Steal takes the lease even from an unexpired holder: the workflow does this when
	// it knows the previous reader is gone. The generation bump fences that reader.
	Steal bool
}

// AcquireReaderLease gives the Session's reader lease to req.Holder with a new, higher
// generation. It fails with ErrLeaseHeld while another holder's lease is unexpired
// (unless req.Steal). Every write of the reader passes the returned generation.
func (s *Store) AcquireReaderLease(ctx context.Context, req LeaseRequest) (ReaderLease, error) {
	if req.TTL <= 0 {
		return ReaderLease{}, fmt.Errorf("acquire reader lease: ttl must be positive")
	}
	var leases []ReaderLease
	// One statement: insert generation 1, or bump the generation where the lease is
	// free (expired, same holder, or stolen). A held lease matches no row.
	err := scanRaw(s.conn(ctx), &leases, `
		INSERT INTO reader_leases AS l (session_id, holder, generation, acquired_at, expires_at)
		VALUES (?, ?, 1, now(), now() + make_interval(secs => ?))
		ON CONFLICT (session_id) DO UPDATE
		SET holder = excluded.holder,
		    generation = l.generation + 1,
		    acquired_at = excluded.acquired_at,
		    expires_at = excluded.expires_at
		WHERE ? OR l.expires_at <= now() OR l.holder = excluded.holder
		RETURNING l.*`,
		req.SessionID, req.Holder, req.TTL.Seconds(), req.Steal)
	if err != nil {
		return ReaderLease{}, mapError("acquire reader lease", err)
	}
	if len(leases) == 0 {
		return ReaderLease{}, fmt.Errorf("acquire reader lease for session %s: %w", req.SessionID, ErrLeaseHeld)
	}
	return leases[0], nil
}

// LeaseRef names one generation of a Session's reader lease.
type LeaseRef struct {
	SessionID  string
	Generation int64
}

// renewReaderLeasesSQL extends the leases whose generation is still the one named, in
// one statement. It locks them in Session order, as the parts' group statement does,
// so the two never wait on each other in a cycle (a single Session's writes lock one
// lease).
const renewReaderLeasesSQL = `
WITH held AS (
	SELECT l.session_id FROM reader_leases l
	JOIN unnest(CAST($1 AS uuid[]), CAST($2 AS bigint[])) AS h(session_id, generation)
		ON h.session_id = l.session_id AND h.generation = l.generation
	ORDER BY l.session_id FOR UPDATE OF l
)
UPDATE reader_leases l SET expires_at = now() + make_interval(secs => $3)
FROM held WHERE l.session_id = held.session_id
RETURNING l.*`

// RenewReaderLeases extends each named lease by ttl and returns the leases it renewed;
// a lease left out was superseded (or is gone): its reader has lost it. A worker
// renews every lease its Relays hold at once, so an idle Session's reader costs the
// database no statement of its own.
func (s *Store) RenewReaderLeases(ctx context.Context, refs []LeaseRef, ttl time.Duration) ([]ReaderLease, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(refs))
	generations := make([]int64, len(refs))
	for i, r := range refs {
		ids[i], generations[i] = r.SessionID, r.Generation
	}
	var renewed []ReaderLease
	if err := scanRaw(s.conn(ctx), &renewed, renewReaderLeasesSQL, ids, generations, ttl.Seconds()); err != nil {
		return nil, mapError("renew reader leases", err)
	}
	return renewed, nil
}

// InLeaseTx runs fn in one transaction fenced by the reader's lease: it locks the
// Session's lease row and refuses a superseded generation (or a missing lease) with
// ErrLeaseLost before fn runs. The lock holds until commit, so a new reader's
// AcquireReaderLease waits for this transaction and a zombie writes nothing after
// it. Every write of a reader (parts, cursor, admitted inputs, responses,
// interactions) goes through here or takes the same lock first the same way
// (ApplyRelayBatch, the parts' one statement); AppendParts does so itself.
func (s *Store) InLeaseTx(ctx context.Context, sessionID string, generation int64, fn func(tx *Store) error) error {
	return s.InTx(ctx, func(tx *Store) error {
		var leases []ReaderLease
		err := tx.conn(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
			Where("session_id = ?", sessionID).Limit(1).Find(&leases).Error
		if err != nil {
			return mapError("lock reader lease", err)
		}
		if len(leases) == 0 {
			return leaseFence(sessionID, false, 0, generation)
		}
		if err := leaseFence(sessionID, true, leases[0].Generation, generation); err != nil {
			return err
		}
		return fn(tx)
	})
}

// leaseFence refuses a writer whose lease generation is not the Session's current one
// (or a Session without a lease) with ErrLeaseLost.
func leaseFence(sessionID string, found bool, current, generation int64) error {
	if !found {
		return fmt.Errorf("session %s has no reader lease: %w", sessionID, ErrLeaseLost)
	}
	if current != generation {
		return fmt.Errorf("session %s lease generation %d superseded by %d: %w", sessionID, generation, current, ErrLeaseLost)
	}
	return nil
}

// GetReaderLeaseBySession returns the Session's current lease.
func (s *Store) GetReaderLeaseBySession(ctx context.Context, sessionID string) (ReaderLease, error) {
	var l ReaderLease
	err := s.conn(ctx).Where("session_id = ?", sessionID).Take(&l).Error
	return l, mapError("get reader lease", err)
}
