package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// Sentinels of history import, named as the API's codes.
var (
	// ErrHistoryImportAfterConversation: the Session already has messages of its own.
	ErrHistoryImportAfterConversation = errors.New("history import after conversation")
	// ErrHistoryImportConflict: a used source_id with other content, or a new message
	// placed before imported ones.
	ErrHistoryImportConflict = errors.New("history import conflict")
)

// ImportedMessage is a row of imported_messages: one message of earlier history.
// CreatedAt is the old system's time. ImportHistory sets SessionID, Position,
// ContentSHA256 and ImportedAt itself; callers fill in the rest.
type ImportedMessage struct {
	SessionID      string          `gorm:"column:session_id;primaryKey"`
	Position       int             `gorm:"column:position;primaryKey"`
	SourceID       string          `gorm:"column:source_id"`
	Role           string          `gorm:"column:role"`
	CreatedAt      time.Time       `gorm:"column:created_at;autoCreateTime:false"`
	Blocks         json.RawMessage `gorm:"column:blocks"`
	Completion     *string         `gorm:"column:completion"`
	ParentSourceID *string         `gorm:"column:parent_source_id"`
	ContentSHA256  []byte          `gorm:"column:content_sha256"`
	ImportedAt     time.Time       `gorm:"column:imported_at"`
}

// TableName is the imported_messages table.
func (ImportedMessage) TableName() string { return "imported_messages" }

// ImportHistory appends earlier messages to a Session that has no messages of its own.
// msgs must start with the messages already imported, in order and unchanged, then
// the new ones; running the same import again changes nothing. It returns how many
// messages were added.
func (s *Store) ImportHistory(ctx context.Context, sessionID string, msgs []ImportedMessage) (int, error) {
	added := 0
	err := s.InTx(ctx, func(tx *Store) error {
		// The Session lock orders this import against inputs being accepted.
		sess, err := tx.lockSession(ctx, sessionID)
		if err != nil {
			return err
		}
		if sess.InputSeq > 0 || sess.OutputSeq > 0 {
			return fmt.Errorf("session %s: %w", sessionID, ErrHistoryImportAfterConversation)
		}
		var existing []ImportedMessage
		if err := tx.conn(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
			Where("session_id = ?", sessionID).Order("position").Find(&existing).Error; err != nil {
			return mapError("read imported history", err)
		}
		for i, m := range msgs {
			sum, err := importedContentHash(m)
			if err != nil {
				return err
			}
			if i < len(existing) {
				if existing[i].SourceID != m.SourceID || string(existing[i].ContentSHA256) != string(sum) {
					return fmt.Errorf("message %d (source_id %s) differs from the imported one: %w", i+1, m.SourceID, ErrHistoryImportConflict)
				}
				continue
			}
			row := ImportedMessage{
				SessionID: sessionID, Position: i + 1, SourceID: m.SourceID, Role: m.Role, CreatedAt: m.CreatedAt,
				Blocks: m.Blocks, Completion: m.Completion, ParentSourceID: m.ParentSourceID, ContentSHA256: sum,
			}
			if err := tx.conn(ctx).Omit("ImportedAt").Create(&row).Error; err != nil {
				if pgCode(err) == pgUniqueViolation {
					return fmt.Errorf("source_id %s is already imported at another position: %w", m.SourceID, ErrHistoryImportConflict)
				}
				return mapError("import message", err)
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

// importedContentHash fingerprints what a message says, so a repeated import can be
// compared without storing the request.
func importedContentHash(m ImportedMessage) ([]byte, error) {
	b, err := json.Marshal(struct {
		Role           string          `json:"role"`
		CreatedAt      time.Time       `json:"created_at"`
		Blocks         json.RawMessage `json:"blocks"`
		Completion     *string         `json:"completion"`
		ParentSourceID *string         `json:"parent_source_id"`
	}{m.Role, m.CreatedAt.UTC(), m.Blocks, m.Completion, m.ParentSourceID})
	if err != nil {
		return nil, fmt.Errorf("fingerprint imported message %s: %w", m.SourceID, err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// CountImportedMessages returns how many messages were imported into the Session.
func (s *Store) CountImportedMessages(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	err := s.conn(ctx).Model(&ImportedMessage{}).Where("session_id = ?", sessionID).Count(&n).Error
	return n, mapError("count imported messages", err)
}

// ListImportedMessagesBySession returns the Session's imported history in order.
func (s *Store) ListImportedMessagesBySession(ctx context.Context, sessionID string) ([]ImportedMessage, error) {
	var out []ImportedMessage
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("position").Find(&out).Error
	return out, mapError("list imported messages", err)
}
