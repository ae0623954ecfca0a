package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinels of history import; check them with errors.Is.
var (
	// ErrImportAfterConversation: the Session already has a message of its own, so
	// history cannot be placed before it.
	ErrImportAfterConversation = errors.New("history import after the conversation started")
	// ErrImportConflict: the import does not continue the one already recorded: other
	// content under a used source_id, or a new message placed before imported ones.
	ErrImportConflict = errors.New("history import conflict")
)

// HistoryMessage is a row of imported_messages (migration 0002): one message of
// earlier history. SourceCreatedAt is the old system's time (column created_at).
type HistoryMessage struct {
	SessionID       string          `gorm:"column:session_id;primaryKey"`
	Position        int             `gorm:"column:position;primaryKey"`
	SourceID        string          `gorm:"column:source_id"`
	Role            string          `gorm:"column:role"`
	SourceCreatedAt time.Time       `gorm:"column:created_at;autoCreateTime:false"`
	Completion      *string         `gorm:"column:completion"`
	ParentSourceID  *string         `gorm:"column:parent_source_id"`
	Blocks          json.RawMessage `gorm:"column:blocks"`
	ContentHash     []byte          `gorm:"column:content_sha256"`
	ImportedAt      time.Time       `gorm:"column:imported_at"`
}

// TableName is the imported_messages table.
func (HistoryMessage) TableName() string { return "imported_messages" }

// ImportHistoryMessages records msgs (Position, ImportedAt are set here) as the Session's
// earlier history. The messages already imported must come first, unchanged; only the
// ones after them are added, so running the same import again changes nothing. It
// holds the Session's row lock, so it cannot interleave with an accepted input. It
// returns how many messages were added.
func (s *Store) ImportHistoryMessages(ctx context.Context, sessionID string, msgs []HistoryMessage) (int, error) {
	added := 0
	err := s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.lockSession(ctx, sessionID); err != nil {
			return err
		}
		var started int64
		if err := tx.conn(ctx).Raw(`SELECT (SELECT count(*) FROM inputs WHERE session_id = ?) + (SELECT count(*) FROM responses WHERE session_id = ?)`,
			sessionID, sessionID).Scan(&started).Error; err != nil {
			return mapError("count conversation messages", err)
		}
		if started > 0 {
			return fmt.Errorf("import history into session %s: %w", sessionID, ErrImportAfterConversation)
		}
		var existing []HistoryMessage
		if err := tx.conn(ctx).Where("session_id = ?", sessionID).Order("position").Find(&existing).Error; err != nil {
			return mapError("list imported messages", err)
		}
		used := map[string]bool{}
		for i, e := range existing {
			used[e.SourceID] = true
			if i < len(msgs) && (msgs[i].SourceID != e.SourceID || !bytes.Equal(msgs[i].ContentHash, e.ContentHash)) {
				return fmt.Errorf("import history: message %d (%s) does not repeat the imported %s: %w", i, msgs[i].SourceID, e.SourceID, ErrImportConflict)
			}
		}
		for i := len(existing); i < len(msgs); i++ {
			m := msgs[i]
			if used[m.SourceID] {
				return fmt.Errorf("import history: source_id %s is already imported at another place: %w", m.SourceID, ErrImportConflict)
			}
			used[m.SourceID] = true
			m.SessionID, m.Position = sessionID, i+1
			if err := tx.conn(ctx).Omit("ImportedAt").Create(&m).Error; err != nil {
				return mapError("insert imported message", err)
			}
			added++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import history: %w", err)
	}
	return added, nil
}

// ListHistoryMessages returns the Session's imported history in order.
func (s *Store) ListHistoryMessages(ctx context.Context, sessionID string) ([]HistoryMessage, error) {
	var out []HistoryMessage
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("position").Find(&out).Error
	return out, mapError("list imported messages", err)
}
