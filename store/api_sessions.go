package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// The Sessions API's reads and writes of sessions rows. The conversation list is
// ordered by last_activity_at (newest first, then id): creation sets it, and the
// Relay moves it with BumpSessionActivity when a response ends, so a finished response
// (including one the program started on its own) brings its conversation to the top
// while a rename, a read mark or a permission change leaves the order alone.

// sessionCounts are the correlated counts a Session's derived state needs.
const sessionCounts = `
	(SELECT count(*) FROM responses r WHERE r.session_id = s.id AND r.outcome IS NULL) AS open_responses,
	(SELECT count(*) FROM interactions i WHERE i.session_id = s.id AND i.state = 'open') AS open_interactions,
	(SELECT count(*) FROM inputs n WHERE n.session_id = s.id AND n.state IN ('pending', 'delivered')) AS held_inputs`

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

// ListSessionSummaries returns a page of the user's Sessions that are not deleted,
// newest activity first, with the counts each one's state is derived from.
func (s *Store) ListSessionSummaries(ctx context.Context, q SessionListQuery) ([]SessionSummary, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("list sessions: limit must be positive")
	}
	where := "s.user_id = ? AND s.deleted_at IS NULL AND (s.archived_at IS NOT NULL) = ?"
	args := []any{q.UserID, q.Archived}
	if q.After != nil {
		where += " AND (s.last_activity_at, s.id) < (?, ?)"
		args = append(args, q.After.LastActivityAt, q.After.ID)
	}
	sql := "SELECT s.*, " + sessionCounts + " FROM sessions s WHERE " + where +
		" ORDER BY s.last_activity_at DESC, s.id DESC LIMIT ?"
	args = append(args, q.Limit)
	if q.After == nil && q.Offset > 0 {
		sql += " OFFSET ?"
		args = append(args, q.Offset)
	}
	var out []SessionSummary
	err := s.conn(ctx).Raw(sql, args...).Scan(&out).Error
	return out, mapError("list sessions", err)
}

// GetSessionFacts reads what a Session's details show besides its row: the open
// responses, the latest ended response, the open interactions and the held inputs.
func (s *Store) GetSessionFacts(ctx context.Context, sessionID string) (SessionDetails, error) {
	var f SessionDetails
	db := s.conn(ctx)
	if err := db.Where("session_id = ? AND outcome IS NULL", sessionID).Order("started_seq").Find(&f.OpenResponses).Error; err != nil {
		return SessionDetails{}, mapError("list open responses", err)
	}
	var last []ResponseRecord
	if err := db.Where("session_id = ? AND outcome IS NOT NULL", sessionID).Order("ended_seq DESC").Limit(1).Find(&last).Error; err != nil {
		return SessionDetails{}, mapError("get last response", err)
	}
	if len(last) == 1 {
		f.LastResponse = &last[0]
	}
	if err := db.Where("session_id = ? AND state = ?", sessionID, interactionStateOpen).Order("opened_at, interaction_id").Find(&f.OpenInteractions).Error; err != nil {
		return SessionDetails{}, mapError("list open interactions", err)
	}
	held, err := s.ListHeldInputsBySession(ctx, sessionID)
	if err != nil {
		return SessionDetails{}, err
	}
	f.HeldInputs = held
	return f, nil
}

// SetSessionTitle sets a title its owner chose. It leaves last_activity_at alone, so
// renaming does not move the Session in the list.
func (s *Store) SetSessionTitle(ctx context.Context, sessionID, title string) (Session, error) {
	return s.updateSessionWhere(ctx, "rename session", sessionID, "deleted_at IS NULL", false, map[string]any{
		"title": title, "title_source": "user", "updated_at": gormExpr("now()"),
	})
}

// SaveSessionPermissionMode stores the Session's permission mode; the workflow applies
// it to a running program or hands it to the next one.
func (s *Store) SaveSessionPermissionMode(ctx context.Context, sessionID, mode string) (Session, error) {
	return s.updateSessionWhere(ctx, "set session permission mode", sessionID, "deleted_at IS NULL", false, map[string]any{
		"permission_mode": mode, "updated_at": gormExpr("now()"),
	})
}

// MarkSessionReadNow records that the owner read the Session now.
func (s *Store) MarkSessionReadNow(ctx context.Context, sessionID string) (Session, error) {
	return s.updateSessionWhere(ctx, "mark session read", sessionID, "deleted_at IS NULL", false, map[string]any{
		"read_at": gormExpr("now()"),
	})
}

// ArchiveSessionUnlessWorking records the Session as archived (keeping the first time). It refuses
// with ErrProgramWorking while the program reports working; the check and the write are
// one statement.
func (s *Store) ArchiveSessionUnlessWorking(ctx context.Context, sessionID string) (Session, error) {
	return s.updateSessionWhere(ctx, "archive session", sessionID,
		"deleted_at IS NULL AND runtime_status IS DISTINCT FROM 'working'", true,
		map[string]any{"archived_at": gormExpr("COALESCE(archived_at, now())"), "updated_at": gormExpr("now()")})
}

// DeleteSessionUnlessWorking moves the Session to the terminal deleted lifecycle. It refuses with
// ErrProgramWorking while the program reports working; deleting twice keeps the first.
func (s *Store) DeleteSessionUnlessWorking(ctx context.Context, sessionID string) (Session, error) {
	sess, err := s.updateSessionWhere(ctx, "delete session", sessionID,
		"runtime_status IS DISTINCT FROM 'working' OR deleted_at IS NOT NULL", true,
		map[string]any{
			"lifecycle":  LifecycleDeleted,
			"deleted_at": gormExpr("COALESCE(deleted_at, now())"),
			"updated_at": gormExpr("now()"),
		})
	return sess, err
}

// RecoverSession moves a terminated Session back to creating so its workflow prepares
// a runtime again; any other lifecycle is ErrWrongLifecycle.
func (s *Store) RecoverSession(ctx context.Context, sessionID string) (Session, error) {
	return s.updateSessionWhere(ctx, "recover session", sessionID, "lifecycle = 'terminated'", false, map[string]any{
		"lifecycle": LifecycleCreating, "updated_at": gormExpr("now()"),
	})
}

// BumpSessionActivity moves the Session to the top of its owner's conversation list.
// The Relay calls it in the transaction that records a response's end (whatever
// started the response), so the list order follows finished responses; nothing the
// API does calls it except Session creation, which sets the column's default.
func (s *Store) BumpSessionActivity(ctx context.Context, sessionID string) error {
	res := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).
		Updates(map[string]any{"last_activity_at": gormExpr("greatest(now(), last_activity_at)"), "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return mapError("bump session activity", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("bump session activity of %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// updateSessionWhere applies changes where guard holds and returns the saved row. When no
// row matches it tells why: ErrNotFound, ErrProgramWorking (the program is working,
// when busyRefuses) or ErrWrongLifecycle.
func (s *Store) updateSessionWhere(ctx context.Context, what, sessionID, guard string, busyRefuses bool, changes map[string]any) (Session, error) {
	var saved []Session
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).
		Where("id = ?", sessionID).Where("(" + guard + ")").Updates(changes)
	if res.Error != nil {
		return Session{}, mapError(what, res.Error)
	}
	if len(saved) == 1 {
		return saved[0], nil
	}
	current, err := s.GetSessionByID(ctx, sessionID)
	if err != nil {
		return Session{}, fmt.Errorf("%s: %w", what, err)
	}
	if busyRefuses && current.RuntimeStatus != nil && *current.RuntimeStatus == "working" && current.DeletedAt == nil {
		return Session{}, fmt.Errorf("%s %s: the program is working: %w", what, sessionID, ErrProgramWorking)
	}
	return Session{}, fmt.Errorf("%s %s in lifecycle %s: %w", what, sessionID, current.Lifecycle, ErrWrongLifecycle)
}
