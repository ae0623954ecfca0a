package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm/clause"
)

// MaxTitleLen is the longest Session title, in characters.
const MaxTitleLen = 200

// NormalizeTitle makes a title one line: runs of whitespace, line breaks included,
// become one space. An empty result or one over MaxTitleLen is ErrInvalidTitle.
func NormalizeTitle(raw string) (string, error) {
	title := strings.Join(strings.Fields(raw), " ")
	if title == "" {
		return "", fmt.Errorf("title is empty: %w", ErrInvalidTitle)
	}
	if n := utf8.RuneCountInString(title); n > MaxTitleLen {
		return "", fmt.Errorf("title has %d characters, at most %d allowed: %w", n, MaxTitleLen, ErrInvalidTitle)
	}
	return title, nil
}

// RenameSession sets the owner's title, normalised by NormalizeTitle. Only the owner
// may rename (ErrNotFound for anyone else); a deleted Session is ErrWrongLifecycle.
// Renaming does not move the Session in the list.
func (s *Store) RenameSession(ctx context.Context, sessionID, userID, rawTitle string) (Session, error) {
	title, err := NormalizeTitle(rawTitle)
	if err != nil {
		return Session{}, err
	}
	return s.guardedUpdate(ctx, "rename session", sessionID, userID, false,
		"lifecycle <> ?", []any{LifecycleDeleted},
		map[string]any{"title": title, "title_source": "user"})
}

// SetAutoTitle sets a generated title unless the Session already has one; a title its
// owner set, even while this one was being generated, is never replaced. It reports
// whether the title was set.
func (s *Store) SetAutoTitle(ctx context.Context, sessionID, rawTitle string) (bool, error) {
	title, err := NormalizeTitle(rawTitle)
	if err != nil {
		return false, err
	}
	res := s.conn(ctx).Model(&Session{}).Where("id = ? AND title IS NULL", sessionID).
		Updates(map[string]any{"title": title, "title_source": "auto", "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return false, mapError("set auto title", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// MarkSessionRead records that the owner read the Session at at (read_at only moves
// forward) and returns it. A zero at means now by the database's clock, the clock
// last_output_at is set by, so a read right after new output never leaves it unread.
// A deleted Session is ErrWrongLifecycle.
func (s *Store) MarkSessionRead(ctx context.Context, sessionID, userID string, at time.Time) (Session, error) {
	readAt := gormExpr("now()")
	if !at.IsZero() {
		readAt = gormExpr("?::timestamptz", at)
	}
	return s.guardedUpdate(ctx, "mark session read", sessionID, userID, false,
		"lifecycle <> ?", []any{LifecycleDeleted},
		map[string]any{"read_at": gormExpr("GREATEST(read_at, ?)", readAt)})
}

// SetSessionPermissionMode stores the Session's permission mode. The Session's workflow
// calls it once a live program accepted the mode, or when no program runs, so the next
// one starts in it. A deleted Session is ErrWrongLifecycle.
func (s *Store) SetSessionPermissionMode(ctx context.Context, sessionID, mode string) (Session, error) {
	return s.guardedUpdate(ctx, "set permission mode", sessionID, "", false,
		"lifecycle <> ?", []any{LifecycleDeleted}, map[string]any{"permission_mode": mode})
}

// ReplaceSessionPermissionMode is a compare-and-set of the permission mode: it stores
// to (nil: not known) only while the stored mode is still from, and reports whether it
// did. The workflow uses it when the program refused the stored mode, so a mode the
// owner chose since is never overwritten.
func (s *Store) ReplaceSessionPermissionMode(ctx context.Context, sessionID, from string, to *string) (bool, error) {
	var mode any
	if to != nil {
		mode = *to
	}
	res := s.conn(ctx).Model(&Session{}).Where("id = ? AND permission_mode = ?", sessionID, from).
		Updates(map[string]any{"permission_mode": mode, "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return false, mapError("replace permission mode", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// setRuntimeStatusSQL records the Agent program's own status ($1) of a Session ($2).
const setRuntimeStatusSQL = `UPDATE sessions SET runtime_status = $1, updated_at = now() WHERE id = $2`

// SetRuntimeStatus records the Agent program's own status report (idle, working,
// waiting). A reader calls it inside its transaction fenced by its lease.
func (s *Store) SetRuntimeStatus(ctx context.Context, sessionID, status string) error {
	// Not updateSession: a Relay sets the status twice a turn, and nothing reads the
	// row it would return.
	res := s.conn(ctx).Exec(setRuntimeStatusSQL, status, sessionID)
	if res.Error != nil {
		return mapError("set runtime status", res.Error)
	}
	return runtimeStatusSet(sessionID, res.RowsAffected)
}

// runtimeStatusSet is ErrNotFound when setRuntimeStatusSQL found no Session.
func runtimeStatusSet(sessionID string, rows int64) error {
	if rows == 0 {
		return fmt.Errorf("set runtime status %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// Placement is where a Session's new runtime lives.
type Placement struct {
	SessionID        string
	SandboxID        string
	HostTaskQueue    string
	EngineSessionKey *string
	ModelName        *string
	// RuntimeInfo is the runtime's observed server info snapshot, if it reports one.
	RuntimeInfo json.RawMessage
}

// SetSessionPlacement records a newly placed runtime: the Session becomes active and
// available, and runtime_generation counts one more runtime.
func (s *Store) SetSessionPlacement(ctx context.Context, p Placement) (Session, error) {
	changes := map[string]any{
		"sandbox_id":          p.SandboxID,
		"host_task_queue":     p.HostTaskQueue,
		"runtime_generation":  gormExpr("runtime_generation + 1"),
		"runtime_unavailable": false,
		"lifecycle":           LifecycleActive,
		"runtime_info":        nullableJSON(p.RuntimeInfo),
	}
	if p.EngineSessionKey != nil {
		changes["engine_session_key"] = *p.EngineSessionKey
	}
	if p.ModelName != nil {
		changes["model_name"] = *p.ModelName
	}
	return s.updateSession(ctx, "set session placement", p.SessionID, "lifecycle NOT IN ?", []any{[]string{LifecycleDeleted}}, changes)
}

// ReleaseSessionRuntime records that the Session's sandbox is gone or released: the
// Session keeps its history and conversation key, and its next input starts a new one.
// No Relay hands inputs over on notice from then on, so every later input is
// signalled; it returns how many inputs are held that were accepted while one did
// (none when none did), which only the caller can hand on to the workflow. The
// Session's row is locked first, so an input accepted meanwhile is either counted
// here or finds the record cleared.
func (s *Store) ReleaseSessionRuntime(ctx context.Context, sessionID string) (heldOnNotice int, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		var onNotice []struct {
			Lease *int64 `gorm:"column:inputs_on_notice_lease"`
		}
		if err := tx.conn(ctx).Raw(`SELECT inputs_on_notice_lease FROM sessions WHERE id = ? FOR UPDATE`, sessionID).
			Scan(&onNotice).Error; err != nil {
			return mapError("release session runtime", err)
		}
		if _, err := tx.updateSession(ctx, "release session runtime", sessionID, "", nil, map[string]any{
			"runtime_unavailable": true, "sandbox_id": nil, "host_task_queue": nil, "runtime_status": nil,
			"inputs_on_notice_lease": nil,
		}); err != nil {
			return err
		}
		if len(onNotice) == 0 || onNotice[0].Lease == nil {
			return nil
		}
		n, err := tx.CountHeldInputs(ctx, sessionID)
		heldOnNotice = n
		return err
	})
	return heldOnNotice, err
}

// SetSessionLifecycle moves the Session to creating, active or terminated; use
// DeleteSession for deleted. A deleted Session never moves again.
func (s *Store) SetSessionLifecycle(ctx context.Context, sessionID, lifecycle string) (Session, error) {
	if lifecycle == LifecycleDeleted {
		return Session{}, fmt.Errorf("set session lifecycle: use DeleteSession")
	}
	return s.updateSession(ctx, "set session lifecycle", sessionID, "lifecycle <> ?", []any{LifecycleDeleted},
		map[string]any{"lifecycle": lifecycle})
}

// ArchiveSession marks the Session archived unless the Agent program is working
// (ErrSessionBusy); a deleted Session is ErrWrongLifecycle. Archiving twice keeps the
// first time. The check and the write are one statement, so a status report in
// between cannot slip past. A terminated Session has no runtime, so a "working" it
// last reported does not hold it.
func (s *Store) ArchiveSession(ctx context.Context, sessionID string) (Session, error) {
	return s.guardedUpdate(ctx, "archive session", sessionID, "", true,
		"lifecycle <> ? AND (runtime_status IS DISTINCT FROM ? OR lifecycle = ?)", []any{LifecycleDeleted, RuntimeWorking, LifecycleTerminated},
		map[string]any{"archived_at": gormExpr("COALESCE(archived_at, now())")})
}

// DeleteSession moves the Session to its terminal deleted state unless the Agent
// program is working (ErrSessionBusy); a terminated Session is never working.
// Deleting twice keeps the first time.
func (s *Store) DeleteSession(ctx context.Context, sessionID string) (Session, error) {
	return s.guardedUpdate(ctx, "delete session", sessionID, "", true,
		"runtime_status IS DISTINCT FROM ? OR lifecycle IN ?", []any{RuntimeWorking, []string{LifecycleDeleted, LifecycleTerminated}},
		map[string]any{"lifecycle": LifecycleDeleted, "deleted_at": gormExpr("COALESCE(deleted_at, now())")})
}

// RecoverSession moves a terminated Session back to creating so its workflow prepares
// a runtime again; any other lifecycle is ErrWrongLifecycle.
func (s *Store) RecoverSession(ctx context.Context, sessionID string) (Session, error) {
	return s.guardedUpdate(ctx, "recover session", sessionID, "", false,
		"lifecycle = ?", []any{LifecycleTerminated}, map[string]any{"lifecycle": LifecycleCreating})
}

// BumpSessionActivity moves the Session to the top of its owner's conversation list.
// FailOpenResponses calls it in the transaction that records a response's end, and
// EndResponse makes the same update in its one statement (whatever started the
// response), so the list order follows finished responses; a clock step back never
// moves a Session down.
func (s *Store) BumpSessionActivity(ctx context.Context, sessionID string) error {
	res := s.conn(ctx).Model(&Session{}).Where("id = ?", sessionID).
		Updates(map[string]any{"last_activity_at": gormExpr("GREATEST(now(), last_activity_at)"), "updated_at": gormExpr("now()")})
	if res.Error != nil {
		return mapError("bump session activity", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("bump session activity of %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// guardedUpdate is updateSession for a write a person asks for. When the guard refuses,
// it tells why: ErrNotFound (no such Session, or ownerID is set and not its owner),
// ErrSessionBusy (busyRefuses and the program is working) or ErrWrongLifecycle.
func (s *Store) guardedUpdate(ctx context.Context, what, sessionID, ownerID string, busyRefuses bool, cond string, args []any, changes map[string]any) (Session, error) {
	if ownerID != "" {
		cond = "user_id = ? AND (" + cond + ")"
		args = append([]any{ownerID}, args...)
	}
	sess, err := s.updateSession(ctx, what, sessionID, cond, args, changes)
	if err == nil || !isNotFoundErr(err) {
		return sess, err
	}
	current, getErr := s.GetSessionByID(ctx, sessionID)
	switch {
	case getErr != nil:
		return Session{}, fmt.Errorf("%s: %w", what, getErr)
	case ownerID != "" && current.UserID != ownerID:
		return Session{}, err
	case busyRefuses && current.RuntimeStatus != nil && *current.RuntimeStatus == RuntimeWorking && current.Lifecycle != LifecycleDeleted:
		return Session{}, fmt.Errorf("%s %s: the program is working: %w", what, sessionID, ErrSessionBusy)
	default:
		return Session{}, fmt.Errorf("%s %s in lifecycle %s: %w", what, sessionID, current.Lifecycle, ErrWrongLifecycle)
	}
}

// updatedSessionReturning returns an updated Session's row with its output position
// (sessionsWithOutput); its updated_at is the update's own, later than its last output.
func updatedSessionReturning() clause.Returning {
	return clause.Returning{Columns: []clause.Column{
		{Name: "sessions.*", Raw: true},
		{Name: "COALESCE((SELECT o.output_seq FROM session_outputs o WHERE o.session_id = sessions.id), 0) AS output_seq", Raw: true},
		{Name: "(SELECT o.last_output_at FROM session_outputs o WHERE o.session_id = sessions.id) AS last_output_at", Raw: true},
	}}
}

// updateSession updates one Session matching the extra condition and returns it, or
// ErrNotFound when no row matched.
func (s *Store) updateSession(ctx context.Context, what, sessionID, cond string, args []any, changes map[string]any) (Session, error) {
	changes["updated_at"] = gormExpr("now()")
	var saved []Session
	q := s.conn(ctx).Model(&saved).Clauses(updatedSessionReturning()).Where("id = ?", sessionID)
	if cond != "" {
		// Parenthesised so an OR in cond never widens the update past this Session.
		q = q.Where("("+cond+")", args...)
	}
	res := q.Updates(changes)
	if res.Error != nil {
		return Session{}, mapError(what, res.Error)
	}
	if len(saved) == 0 {
		return Session{}, fmt.Errorf("%s %s: %w", what, sessionID, ErrNotFound)
	}
	return saved[0], nil
}
