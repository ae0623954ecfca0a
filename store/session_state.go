package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/internal/sessionstate"
)

// Session states as the API reports them; internal/sessionstate owns their derivation.
// Only CREATING, TERMINATED and DELETED are stored (as lifecycle); READY, PROCESSING
// and WAITING_INPUT are derived.
const (
	StateCreating     = sessionstate.Creating
	StateReady        = sessionstate.Ready
	StateProcessing   = sessionstate.Processing
	StateWaitingInput = sessionstate.WaitingInput
	StateTerminated   = sessionstate.Terminated
	StateDeleted      = sessionstate.Deleted
)

// SessionFacts is a Session with the counts its state is derived from, read in one
// statement so they are consistent with each other.
type SessionFacts struct {
	Session          `gorm:"embedded"`
	OpenResponses    int `gorm:"column:open_responses"`
	OpenInteractions int `gorm:"column:open_interactions"`
	HeldInputs       int `gorm:"column:held_inputs"`
}

// State derives the Session's state from its facts (see sessionstate.Derive).
func (f SessionFacts) State() sessionstate.State {
	status := ""
	if f.RuntimeStatus != nil {
		status = *f.RuntimeStatus
	}
	return sessionstate.Derive(sessionstate.Facts{
		Lifecycle:        f.Lifecycle,
		Deleted:          f.DeletedAt != nil,
		RuntimeStatus:    status,
		OpenResponses:    f.OpenResponses,
		OpenInteractions: f.OpenInteractions,
		HeldInputs:       f.HeldInputs,
	})
}

// sessionFactsCounts are the correlated counts of SessionFacts, for sessions s.
const sessionFactsCounts = `
	(SELECT count(*) FROM responses r WHERE r.session_id = s.id AND r.outcome IS NULL) AS open_responses,
	(SELECT count(*) FROM interactions i WHERE i.session_id = s.id AND i.state = 'open') AS open_interactions,
	(SELECT count(*) FROM inputs n WHERE n.session_id = s.id AND n.state IN ('pending', 'delivered')) AS held_inputs`

// sessionFactsSelect reads Sessions (s) with the correlated counts of SessionFacts.
const sessionFactsSelect = `SELECT ` + sessionColumns + `,` + sessionFactsCounts + `
	FROM ` + sessionsWithOutput

// GetSessionFactsByID reads a Session and the counts its state is derived from. A
// Relay reads it at every observation it sends, so it scans the columns itself
// rather than through GORM's reflection (getSessionWith).
func (s *Store) GetSessionFactsByID(ctx context.Context, sessionID string) (SessionFacts, error) {
	var f SessionFacts
	sess, found, err := s.getSessionWith(ctx, `SELECT `+sessionColumns+`,`+sessionFactsCounts+` FROM `+sessionsWithOutput+` WHERE s.id = @id`,
		map[string]any{"id": sessionID}, &f.OpenResponses, &f.OpenInteractions, &f.HeldInputs)
	if err != nil {
		return SessionFacts{}, mapError("get session facts", err)
	}
	if !found {
		return SessionFacts{}, fmt.Errorf("get session facts %s: %w", sessionID, ErrNotFound)
	}
	f.Session = sess
	return f, nil
}

// SessionListCursor is the position after the last Session of a page.
type SessionListCursor struct {
	LastActivityAt time.Time
	ID             string
}

// SessionListQuery selects a page of one user's conversation list.
type SessionListQuery struct {
	UserID string
	// Archived lists the archived Sessions instead of the active ones.
	Archived bool
	// After continues after a previous page's last Session (keyset paging).
	After *SessionListCursor
	// Offset skips that many Sessions (page-number paging); ignored with After.
	Offset int
	// Limit caps the page; it must be positive.
	Limit int
}

// ListSessionFactsByUser returns a page of the user's Sessions that are not deleted,
// newest activity first, each with the counts its state is derived from. The order is
// last_activity_at: creation sets it and a response's end moves it
// (BumpSessionActivity), while a rename, a read mark or a permission change leaves it.
func (s *Store) ListSessionFactsByUser(ctx context.Context, q SessionListQuery) ([]SessionFacts, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("list sessions: limit must be positive")
	}
	where := " WHERE s.user_id = ? AND s.deleted_at IS NULL AND (s.archived_at IS NOT NULL) = ?"
	args := []any{q.UserID, q.Archived}
	if q.After != nil {
		where += " AND (s.last_activity_at, s.id) < (?, ?)"
		args = append(args, q.After.LastActivityAt, q.After.ID)
	}
	sql := sessionFactsSelect + where + " ORDER BY s.last_activity_at DESC, s.id DESC LIMIT ?"
	args = append(args, q.Limit)
	if q.After == nil && q.Offset > 0 {
		sql += " OFFSET ?"
		args = append(args, q.Offset)
	}
	var out []SessionFacts
	err := scanRaw(s.conn(ctx), &out, sql, args...)
	return out, mapError("list sessions", err)
}

// SessionDetails are the rows a Session's details show: its own, the open responses,
// the latest ended response, the open interactions and the held inputs, all read at
// one moment.
type SessionDetails struct {
	Session          Session
	OpenResponses    []Response
	LastResponse     *Response
	OpenInteractions []Interaction
	HeldInputs       []Input
}

// GetSessionDetailsByID reads the rows a Session's details show in one snapshot: read
// one after another, an input admitted and answered between two reads would show as
// neither held nor answered, and the Session as idle while it works.
func (s *Store) GetSessionDetailsByID(ctx context.Context, sessionID string) (SessionDetails, error) {
	var d SessionDetails
	err := s.InSnapshot(ctx, func(tx *Store) error {
		var err error
		if d.Session, err = tx.GetSessionByID(ctx, sessionID); err != nil {
			return err
		}
		if d.OpenResponses, err = tx.ListOpenResponses(ctx, sessionID); err != nil {
			return err
		}
		last, err := tx.GetLastEndedResponse(ctx, sessionID)
		switch {
		case err == nil:
			d.LastResponse = &last
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if d.OpenInteractions, err = tx.ListOpenInteractions(ctx, sessionID); err != nil {
			return err
		}
		d.HeldInputs, err = tx.ListHeldInputsBySession(ctx, sessionID)
		return err
	})
	if err != nil {
		return SessionDetails{}, err
	}
	return d, nil
}

// Facts counts the details into the facts the Session's state is derived from.
func (d SessionDetails) Facts() SessionFacts {
	return SessionFacts{Session: d.Session, OpenResponses: len(d.OpenResponses),
		OpenInteractions: len(d.OpenInteractions), HeldInputs: len(d.HeldInputs)}
}
