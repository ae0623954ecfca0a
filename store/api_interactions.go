package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// GetInteraction returns one interaction of a Session.
func (s *Store) GetInteraction(ctx context.Context, sessionID, interactionID string) (InteractionRecord, error) {
	var r InteractionRecord
	err := s.conn(ctx).Where("session_id = ? AND interaction_id = ?", sessionID, interactionID).Take(&r).Error
	return r, mapError("get interaction", err)
}

// SaveAnswerIfOpen records a person's answer to an open interaction that has no
// answer yet; the row stays open until the runtime closes it. An interaction that was
// answered (or has an answer saved), withdrawn or expired is ErrInteractionClosed;
// the check and the write are one statement, so two answers cannot both be saved.
func (s *Store) SaveAnswerIfOpen(ctx context.Context, sessionID, interactionID string, answer json.RawMessage, userID string) (InteractionRecord, error) {
	var saved []InteractionRecord
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).
		Where("session_id = ? AND interaction_id = ? AND state = ? AND answer_saved_at IS NULL", sessionID, interactionID, interactionStateOpen).
		Updates(map[string]any{"answer": answer, "answered_by": userID, "answer_saved_at": gormExpr("now()")})
	if res.Error != nil {
		return InteractionRecord{}, mapError("save interaction answer", res.Error)
	}
	if len(saved) == 1 {
		return saved[0], nil
	}
	current, err := s.GetInteraction(ctx, sessionID, interactionID)
	if err != nil {
		return InteractionRecord{}, fmt.Errorf("save interaction answer: %w", err)
	}
	return InteractionRecord{}, fmt.Errorf("save answer to interaction %s in state %s: %w", interactionID, current.State, ErrInteractionClosed)
}

// ListChildRuns returns the Session's child runs in creation order.
func (s *Store) ListChildRuns(ctx context.Context, sessionID string) ([]ChildRunRecord, error) {
	var out []ChildRunRecord
	err := s.conn(ctx).Where("session_id = ?", sessionID).Order("created_at, id").Find(&out).Error
	return out, mapError("list child runs", err)
}

// GetChildRun returns one child run of a Session.
func (s *Store) GetChildRun(ctx context.Context, sessionID, childRunID string) (ChildRunRecord, error) {
	var r ChildRunRecord
	err := s.conn(ctx).Where("session_id = ? AND id = ?", sessionID, childRunID).Take(&r).Error
	return r, mapError("get child run", err)
}

// ListChildRunMessageParts returns the output parts that carry messages of one child
// run (data-subagent parts with a message), in seq order.
func (s *Store) ListChildRunMessageParts(ctx context.Context, sessionID, childRunID string) ([]OutputPart, error) {
	var out []OutputPart
	err := s.conn(ctx).Where("session_id = ? AND frame->>'type' = 'data-subagent' AND frame->'data'->>'child_run_id' = ? AND jsonb_typeof(frame->'data'->'message') = 'object'", sessionID, childRunID).
		Order("seq").Find(&out).Error
	return out, mapError("list child run messages", err)
}
