package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"
)

// NewSession is what CreateSessionIdempotent needs.
type NewSession struct {
	UserID  string
	AgentID string
	// IdempotencyKey, when set, makes creation idempotent per (user, Agent, key).
	IdempotencyKey string
	// Kind defaults to agent_chat.
	Kind string
	// DefaultPermissionMode is the mode the Session starts in when its Agent sets
	// none: the engine's declared default for the Session's kind (empty: none).
	DefaultPermissionMode string
	// MaxLiveBoxes, when positive, refuses a new Session (ErrLiveBoxLimit) while
	// the user already has that many Sessions holding or starting a box. A
	// retried create of an existing Session is never refused.
	MaxLiveBoxes int
}

// sessionIdempotencyKey is a row of session_idempotency_keys.
type sessionIdempotencyKey struct {
	UserID    string `gorm:"column:user_id;primaryKey"`
	AgentID   string `gorm:"column:agent_id;primaryKey"`
	Key       string `gorm:"column:key;primaryKey"`
	SessionID string `gorm:"column:session_id"`
}

// TableName is the session_idempotency_keys table.
func (sessionIdempotencyKey) TableName() string { return "session_idempotency_keys" }

// CreateSessionIdempotent creates a Session for the user and Agent, or, when the same
// IdempotencyKey was used before for them, returns that Session with created false.
// Concurrent calls with one key create one Session: the key's primary key decides,
// not a read before the write. The Session starts in lifecycle creating with the
// Agent's default permission mode.
func (s *Store) CreateSessionIdempotent(ctx context.Context, in NewSession) (Session, bool, error) {
	agent, err := s.GetAgentByID(ctx, in.AgentID)
	if err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", err)
	}
	sess := Session{
		ID:             uuid.NewString(),
		AgentID:        agent.ID,
		UserID:         in.UserID,
		Kind:           in.Kind,
		PermissionMode: agent.PermissionMode,
		Lifecycle:      LifecycleCreating,
	}
	if sess.Kind == "" {
		sess.Kind = "agent_chat"
	}
	if sess.PermissionMode == nil && in.DefaultPermissionMode != "" {
		mode := in.DefaultPermissionMode
		sess.PermissionMode = &mode
	}
	var existingID string
	err = s.InTx(ctx, func(tx *Store) error {
		if in.IdempotencyKey != "" {
			// Claim the key first; the Session foreign key is deferred to commit. A
			// concurrent claimer waits here on the primary key until the winner commits.
			claim := sessionIdempotencyKey{UserID: in.UserID, AgentID: in.AgentID, Key: in.IdempotencyKey, SessionID: sess.ID}
			res := tx.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&claim)
			if res.Error != nil {
				return mapError("claim idempotency key", res.Error)
			}
			if res.RowsAffected == 0 {
				var held sessionIdempotencyKey
				if err := tx.conn(ctx).Where("user_id = ? AND agent_id = ? AND key = ?", in.UserID, in.AgentID, in.IdempotencyKey).Take(&held).Error; err != nil {
					return mapError("read idempotency key", err)
				}
				existingID = held.SessionID
				return nil
			}
		}
		if in.MaxLiveBoxes > 0 {
			if err := tx.checkLiveBoxes(ctx, in.UserID, in.MaxLiveBoxes); err != nil {
				return err
			}
		}
		if err := tx.conn(ctx).Omit("LastActivityAt").Create(&sess).Error; err != nil {
			return mapError("insert session", err)
		}
		// Every writer of the Session's output advances this row (sessionsWithOutput).
		return mapError("insert session output position", tx.conn(ctx).Exec(`INSERT INTO session_outputs (session_id) VALUES (?)`, sess.ID).Error)
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", err)
	}
	id, created := sess.ID, existingID == ""
	if !created {
		id = existingID
	}
	out, err := s.GetSessionByID(ctx, id)
	if err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", err)
	}
	return out, created, nil
}

// GetSessionByID returns one Session, deleted or not.
func (s *Store) GetSessionByID(ctx context.Context, id string) (Session, error) {
	return s.takeSession(ctx, "get session by id", `SELECT `+sessionColumns+` FROM `+sessionsWithOutput+` WHERE s.id = ?`, id)
}

// takeSession reads the one Session query (sessionColumns) selects, or ErrNotFound.
func (s *Store) takeSession(ctx context.Context, what, query string, id string) (Session, error) {
	var rows []Session
	if err := scanRaw(s.conn(ctx), &rows, query, id); err != nil {
		return Session{}, mapError(what, err)
	}
	if len(rows) == 0 {
		return Session{}, fmt.Errorf("%s: session %s: %w", what, id, ErrNotFound)
	}
	return rows[0], nil
}

// OperatorSummary names a Session for operators in one line: its Agent and its owner's
// user id (never personal data: the Temporal UI keeps it in workflow history).
func (s *Store) OperatorSummary(ctx context.Context, sessionID string) (string, error) {
	var row struct {
		AgentName string
		UserID    string
	}
	err := scanRaw(s.conn(ctx), &row, `SELECT a.name AS agent_name, s.user_id AS user_id
		FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ?`, sessionID)
	if err != nil {
		return "", mapError("operator summary", err)
	}
	if row.AgentName == "" {
		return "", fmt.Errorf("operator summary of session %s: %w", sessionID, ErrNotFound)
	}
	return "Session of Agent " + row.AgentName + " · owner " + row.UserID, nil
}

// lockSession takes the Session's row lock for the rest of the transaction: inputs of
// one Session are numbered under it, so their order has no gaps, and it orders a write
// with lifecycle changes. Its output position is read, not locked: the Session's
// reader lease orders the writers of its output (InLeaseTx).
func (s *Store) lockSession(ctx context.Context, id string) (Session, error) {
	return s.takeSession(ctx, "lock session", `SELECT `+sessionColumns+` FROM `+sessionsWithOutput+` WHERE s.id = ? FOR UPDATE OF s`, id)
}
