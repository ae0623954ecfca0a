package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/astrabox/astrabox/store/pubsub"
)

// NewInput is a person's message to accept into custody.
type NewInput struct {
	SessionID string
	// ClientMessageID, when set, makes the input idempotent within its Session.
	ClientMessageID *string
	Content         string
}

// InsertInput accepts an input: it is durable when InsertInput returns. The same
// ClientMessageID in the same Session returns the first input with duplicate true,
// also under concurrent calls: the partial unique index (session_id,
// client_message_id) and ON CONFLICT DO NOTHING decide, not a read before the write.
// A new input gets the next accepted-order seq and wakes the Session's reader through
// SessionInputsChannel, in the same transaction.
func (s *Store) InsertInput(ctx context.Context, in NewInput) (Input, bool, error) {
	var out Input
	duplicate := false
	err := s.InTx(ctx, func(tx *Store) error {
		// The Session row lock orders inputs: every accepted input gets the next seq.
		// It does not decide duplicates; the unique index does, below.
		sess, err := tx.lockSession(ctx, in.SessionID)
		if err != nil {
			return err
		}
		row := Input{
			ID:              uuid.NewString(),
			SessionID:       in.SessionID,
			Seq:             sess.InputSeq + 1,
			ClientMessageID: in.ClientMessageID,
			Content:         in.Content,
			State:           InputPending,
		}
		res := tx.conn(ctx).Omit("AcceptedAt").Clauses(clause.OnConflict{
			Columns:     []clause.Column{{Name: "session_id"}, {Name: "client_message_id"}},
			TargetWhere: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "client_message_id IS NOT NULL"}}},
			DoNothing:   true,
		}).Create(&row)
		if res.Error != nil {
			return mapError("insert input", res.Error)
		}
		if res.RowsAffected == 0 && in.ClientMessageID != nil {
			// The client_message_id is taken: the first input is the answer. In READ
			// COMMITTED this new statement sees the row the conflict was about.
			found, err := tx.findInputByClientMessageID(ctx, in.SessionID, *in.ClientMessageID)
			if err != nil {
				return err
			}
			if found == nil {
				return fmt.Errorf("insert input: conflict without a matching row")
			}
			out, duplicate = *found, true
			return nil
		}
		if err := tx.conn(ctx).Model(&Session{}).Where("id = ?", in.SessionID).
			Updates(map[string]any{"input_seq": row.Seq, "updated_at": gormExpr("now()")}).Error; err != nil {
			return mapError("advance input seq", err)
		}
		if err := tx.notify(ctx, pubsub.SessionInputsChannel(in.SessionID), row.ID); err != nil {
			return err
		}
		return tx.conn(ctx).Where("id = ?", row.ID).Take(&out).Error
	})
	if err != nil {
		return Input{}, false, fmt.Errorf("insert input: %w", err)
	}
	return out, duplicate, nil
}

func (s *Store) findInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (*Input, error) {
	var found []Input
	err := s.conn(ctx).Where("session_id = ? AND client_message_id = ?", sessionID, clientMessageID).Limit(1).Find(&found).Error
	if err != nil {
		return nil, mapError("find input by client message id", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	return &found[0], nil
}

// ListInputsBySession returns a Session's inputs in accepted order.
func (s *Store) ListInputsBySession(ctx context.Context, sessionID string) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("seq").Find(&out).Error
	return out, mapError("list inputs by session", err)
}

// CountHeldInputs counts the Session's held inputs (for admission policies).
func (s *Store) CountHeldInputs(ctx context.Context, sessionID string) (int, error) {
	var n int64
	err := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).Count(&n).Error
	return int(n), mapError("count held inputs", err)
}

// GetInputByClientMessageID returns the Session's input with this client_message_id.
func (s *Store) GetInputByClientMessageID(ctx context.Context, sessionID, clientMessageID string) (Input, error) {
	found, err := s.findInputByClientMessageID(ctx, sessionID, clientMessageID)
	if err != nil {
		return Input{}, err
	}
	if found == nil {
		return Input{}, fmt.Errorf("get input %q of session %s: %w", clientMessageID, sessionID, ErrNotFound)
	}
	return *found, nil
}

// notify sends a NOTIFY that PostgreSQL delivers when the transaction commits.
func (s *Store) notify(ctx context.Context, channel, payload string) error {
	if err := s.conn(ctx).Exec("SELECT pg_notify(?, ?)", channel, payload).Error; err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}
