package store

import (
	"context"
	"fmt"
	"time"
)

// Session states as the API reports them. Only CREATING, TERMINATED and DELETED are
// stored (as lifecycle); READY, PROCESSING and WAITING_INPUT are derived.
const (
	StateCreating     = "CREATING"
	StateReady        = "READY"
	StateProcessing   = "PROCESSING"
	StateWaitingInput = "WAITING_INPUT"
	StateTerminated   = "TERMINATED"
	StateDeleted      = "DELETED"
)

// SessionFacts are the recorded facts a Session's state is derived from.
type SessionFacts struct {
	Session          Session
	OpenResponses    int64
	OpenInteractions int64
	HeldInputs       int64
}

// State derives the Session's state from its facts: a response paused on a person (or
// a program reporting waiting) is WAITING_INPUT; a working program, an open response
// or a held input is PROCESSING; otherwise READY.
func (f SessionFacts) State() string {
	switch f.Session.Lifecycle {
	case LifecycleDeleted:
		return StateDeleted
	case LifecycleTerminated:
		return StateTerminated
	case LifecycleCreating:
		return StateCreating
	}
	status := ""
	if f.Session.RuntimeStatus != nil {
		status = *f.Session.RuntimeStatus
	}
	switch {
	case f.OpenInteractions > 0 || status == RuntimeWaiting:
		return StateWaitingInput
	case status == RuntimeWorking || f.OpenResponses > 0 || f.HeldInputs > 0:
		return StateProcessing
	default:
		return StateReady
	}
}

// GetSessionFactsByID reads a Session and the counts its state is derived from, in
// one statement so they are consistent with each other.
func (s *Store) GetSessionFactsByID(ctx context.Context, sessionID string) (SessionFacts, error) {
	var rows []struct {
		Session
		OpenResponses    int64 `gorm:"column:open_responses"`
		OpenInteractions int64 `gorm:"column:open_interactions"`
		HeldInputs       int64 `gorm:"column:held_inputs"`
	}
	err := s.conn(ctx).Raw(`
		SELECT s.*,
		  (SELECT count(*) FROM responses r WHERE r.session_id = s.id AND r.outcome IS NULL) AS open_responses,
		  (SELECT count(*) FROM interactions i WHERE i.session_id = s.id AND i.state = 'open') AS open_interactions,
		  (SELECT count(*) FROM inputs n WHERE n.session_id = s.id AND n.state IN ('pending', 'delivered')) AS held_inputs
		FROM sessions s WHERE s.id = ?`, sessionID).Scan(&rows).Error
	if err != nil {
		return SessionFacts{}, mapError("get session facts", err)
	}
	if len(rows) == 0 {
		return SessionFacts{}, fmt.Errorf("get session facts %s: %w", sessionID, ErrNotFound)
	}
	r := rows[0]
	return SessionFacts{Session: r.Session, OpenResponses: r.OpenResponses, OpenInteractions: r.OpenInteractions, HeldInputs: r.HeldInputs}, nil
}

// SessionPage is a position in a user's Session list, ordered by last activity,
// newest first.
type SessionPage struct {
	LastActivityAt time.Time
	ID             string
}

// ListSessionsParams selects a page of a user's Sessions.
type ListSessionsParams struct {
	UserID          string
	IncludeArchived bool
	// After continues after this position; nil starts at the newest.
	After *SessionPage
	// Limit is the page size; 0 means 50.
	Limit int
}

// ListSessionsByUser returns a page of the user's Sessions that are not deleted, most
// recent activity first, and the position of the next page (nil on the last page).
func (s *Store) ListSessionsByUser(ctx context.Context, p ListSessionsParams) ([]Session, *SessionPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	q := s.conn(ctx).Where("user_id = ? AND deleted_at IS NULL", p.UserID)
	if !p.IncludeArchived {
		q = q.Where("archived_at IS NULL")
	}
	if p.After != nil {
		q = q.Where("(last_activity_at, id) < (?, ?)", p.After.LastActivityAt, p.After.ID)
	}
	var out []Session
	if err := q.Order("last_activity_at DESC, id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, nil, mapError("list sessions by user", err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &SessionPage{LastActivityAt: last.LastActivityAt, ID: last.ID}, nil
}
