package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/store/pubsub"
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
	err := s.conn(ctx).Raw(`
		INSERT INTO reader_leases AS l (session_id, holder, generation, acquired_at, expires_at)
		VALUES (?, ?, 1, now(), now() + make_interval(secs => ?))
		ON CONFLICT (session_id) DO UPDATE
		SET holder = excluded.holder,
		    generation = l.generation + 1,
		    acquired_at = excluded.acquired_at,
		    expires_at = excluded.expires_at
		WHERE ? OR l.expires_at <= now() OR l.holder = excluded.holder
		RETURNING l.*`,
		req.SessionID, req.Holder, req.TTL.Seconds(), req.Steal).Scan(&leases).Error
	if err != nil {
		return ReaderLease{}, mapError("acquire reader lease", err)
	}
	if len(leases) == 0 {
		return ReaderLease{}, fmt.Errorf("acquire reader lease for session %s: %w", req.SessionID, ErrLeaseHeld)
	}
	return leases[0], nil
}

// RenewReaderLease extends the lease of generation by ttl; a superseded generation
// gets ErrLeaseLost.
func (s *Store) RenewReaderLease(ctx context.Context, sessionID string, generation int64, ttl time.Duration) (ReaderLease, error) {
	var leases []ReaderLease
	res := s.conn(ctx).Model(&leases).Clauses(clause.Returning{}).
		Where("session_id = ? AND generation = ?", sessionID, generation).
		Update("expires_at", gormExpr("now() + make_interval(secs => ?)", ttl.Seconds()))
	if res.Error != nil {
		return ReaderLease{}, mapError("renew reader lease", res.Error)
	}
	if len(leases) == 0 {
		return ReaderLease{}, fmt.Errorf("renew reader lease for session %s generation %d: %w", sessionID, generation, ErrLeaseLost)
	}
	return leases[0], nil
}

// GetReaderLeaseBySession returns the Session's current lease.
func (s *Store) GetReaderLeaseBySession(ctx context.Context, sessionID string) (ReaderLease, error) {
	var l ReaderLease
	err := s.conn(ctx).Where("session_id = ?", sessionID).Take(&l).Error
	return l, mapError("get reader lease", err)
}

// NewPart is one browser part to append to the output log.
type NewPart struct {
	// ResponseID is nil for output that belongs to no response (a child run's status).
	ResponseID *string
	Frame      json.RawMessage
}

// CursorUpdate is the runtime cursor after the appended parts' events.
type CursorUpdate struct {
	Generation string
	Position   json.RawMessage
}

// AppendRequest is one fenced write of a reader.
type AppendRequest struct {
	SessionID       string
	LeaseGeneration int64
	Parts           []NewPart
	// Cursor, when set, is committed with the parts: a reader that takes over resumes
	// after it with no repeated and no missing part.
	Cursor *CursorUpdate
}

// AppendResult names the seqs given to the appended parts; both are the Session's
// previous output_seq when no part was appended.
type AppendResult struct {
	FirstSeq int64
	LastSeq  int64
}

// AppendParts writes a reader's parts and cursor in one transaction, fenced by its
// lease generation: it locks the lease row and refuses a superseded generation with
// ErrLeaseLost, writing nothing. Parts get consecutive seqs after the Session's
// output_seq, so the log has no gaps; the cursor is upserted; and a notification on
// SessionOutputChannel carries the last seq, delivered at commit. On a Store from InTx
// it joins that transaction, so a reader can commit other facts of the same events
// (an admitted input, a response start) atomically with their parts.
func (s *Store) AppendParts(ctx context.Context, req AppendRequest) (AppendResult, error) {
	var result AppendResult
	err := s.InTx(ctx, func(tx *Store) error {
		var lease ReaderLease
		err := tx.conn(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
			Where("session_id = ?", req.SessionID).Take(&lease).Error
		if err != nil {
			if mapped := mapError("lock reader lease", err); isNotFound(mapped) {
				return fmt.Errorf("session %s has no reader lease: %w", req.SessionID, ErrLeaseLost)
			}
			return mapError("lock reader lease", err)
		}
		if lease.Generation != req.LeaseGeneration {
			return fmt.Errorf("session %s lease generation %d superseded by %d: %w", req.SessionID, req.LeaseGeneration, lease.Generation, ErrLeaseLost)
		}
		var last int64
		n := int64(len(req.Parts))
		updates := map[string]any{"output_seq": gormExpr("output_seq + ?", n)}
		if n > 0 {
			updates["last_output_at"] = gormExpr("now()")
			updates["updated_at"] = gormExpr("now()")
		}
		var sessions []Session
		res := tx.conn(ctx).Model(&sessions).Clauses(clause.Returning{Columns: []clause.Column{{Name: "output_seq"}}}).
			Where("id = ?", req.SessionID).Updates(updates)
		if res.Error != nil {
			return mapError("advance output seq", res.Error)
		}
		if len(sessions) == 0 {
			return fmt.Errorf("advance output seq of session %s: %w", req.SessionID, ErrNotFound)
		}
		last = sessions[0].OutputSeq
		result = AppendResult{FirstSeq: last - n + 1, LastSeq: last}
		if n == 0 {
			result.FirstSeq = last
		}
		if n > 0 {
			rows := make([]OutputPart, n)
			for i, p := range req.Parts {
				rows[i] = OutputPart{SessionID: req.SessionID, Seq: result.FirstSeq + int64(i), ResponseID: p.ResponseID, Frame: p.Frame}
			}
			if err := tx.conn(ctx).Omit("CreatedAt").Create(&rows).Error; err != nil {
				return mapError("insert output parts", err)
			}
		}
		if req.Cursor != nil {
			cur := RuntimeCursor{
				SessionID:       req.SessionID,
				Generation:      req.Cursor.Generation,
				Position:        req.Cursor.Position,
				ThroughSeq:      last,
				LeaseGeneration: req.LeaseGeneration,
			}
			err := tx.conn(ctx).Omit("UpdatedAt").Clauses(clause.OnConflict{
				Columns: []clause.Column{{Name: "session_id"}},
				DoUpdates: clause.Assignments(map[string]any{
					"generation":       cur.Generation,
					"position":         cur.Position,
					"through_seq":      cur.ThroughSeq,
					"lease_generation": cur.LeaseGeneration,
					"updated_at":       gormExpr("now()"),
				}),
			}).Create(&cur).Error
			if err != nil {
				return mapError("save runtime cursor", err)
			}
		}
		if n > 0 {
			return tx.notify(ctx, pubsub.SessionOutputChannel(req.SessionID), strconv.FormatInt(last, 10))
		}
		return nil
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("append parts: %w", err)
	}
	return result, nil
}

// ListOutputPartsAfter returns up to limit parts with seq > afterSeq, in order.
func (s *Store) ListOutputPartsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]OutputPart, error) {
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND seq > ?", sessionID, afterSeq).Order("seq").Limit(limit).Find(&out).Error
	return out, mapError("list output parts", err)
}

// GetRuntimeCursorBySession returns the Session's saved runtime cursor.
func (s *Store) GetRuntimeCursorBySession(ctx context.Context, sessionID string) (RuntimeCursor, error) {
	var c RuntimeCursor
	err := s.conn(ctx).Where("session_id = ?", sessionID).Take(&c).Error
	return c, mapError("get runtime cursor", err)
}
