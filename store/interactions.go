package store

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm/clause"
)

// InteractionOpening is InteractionOpened as the runtime reported it.
type InteractionOpening struct {
	SessionID     string
	InteractionID string
	ResponseID    *string
	Contract      json.RawMessage
}

// OpenInteraction records an interaction the runtime waits on and reports whether it
// was new; a replayed opening changes nothing.
func (s *Store) OpenInteraction(ctx context.Context, in InteractionOpening) (Interaction, bool, error) {
	row := Interaction{
		SessionID:     in.SessionID,
		InteractionID: in.InteractionID,
		ResponseID:    in.ResponseID,
		Contract:      in.Contract,
		State:         InteractionOpen,
	}
	res := s.conn(ctx).Omit("OpenedAt").Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return Interaction{}, false, mapError("open interaction", res.Error)
	}
	got, err := s.GetInteractionByID(ctx, in.SessionID, in.InteractionID)
	return got, res.RowsAffected == 1, err
}

// SaveInteractionAnswer saves a person's answer to an open interaction. The first
// answer wins; the interaction stays open until the runtime closes it, since a saved
// answer does not prove the runtime accepted it. A closed interaction, or one already
// answered, gives ErrInteractionNotOpen.
func (s *Store) SaveInteractionAnswer(ctx context.Context, sessionID, interactionID string, answer json.RawMessage, answeredBy *string) (Interaction, error) {
	var saved []Interaction
	res := s.conn(ctx).Model(&saved).Clauses(clause.Returning{}).
		Where("session_id = ? AND interaction_id = ? AND state = ? AND answer IS NULL", sessionID, interactionID, InteractionOpen).
		Updates(map[string]any{"answer": answer, "answered_by": answeredBy, "answer_saved_at": gormExpr("now()")})
	if res.Error != nil {
		return Interaction{}, mapError("save interaction answer", res.Error)
	}
	if len(saved) == 1 {
		return saved[0], nil
	}
	current, err := s.GetInteractionByID(ctx, sessionID, interactionID)
	if err != nil {
		return Interaction{}, err
	}
	return current, fmt.Errorf("save answer to interaction %s (%s): %w", interactionID, current.State, ErrInteractionNotOpen)
}

// ClosureAnsweredWithoutAnswer is the closure reason of an interaction the runtime
// reported answered although no answer was saved through the API: the program, or
// something it runs, answered itself. Only a person answers through the platform, so
// the record says the runtime stopped waiting (withdrawn), never that it was answered.
const ClosureAnsweredWithoutAnswer = "answered_without_platform_answer"

// CloseInteraction records InteractionClosed: open -> state (answered, withdrawn or
// expired) with the runtime's reason. An answered closure counts only when an answer
// was saved first; otherwise it is recorded withdrawn with
// ClosureAnsweredWithoutAnswer. It reports false when it was already closed.
func (s *Store) CloseInteraction(ctx context.Context, sessionID, interactionID, state, reason string) (bool, error) {
	closedState, closedReason := any(state), any(reason)
	if state == InteractionAnswered {
		closedState = gormExpr("CASE WHEN answer_saved_at IS NULL THEN ? ELSE ? END", InteractionWithdrawn, state)
		closedReason = gormExpr("CASE WHEN answer_saved_at IS NULL THEN ? ELSE ? END", ClosureAnsweredWithoutAnswer, reason)
	}
	res := s.conn(ctx).Model(&Interaction{}).
		Where("session_id = ? AND interaction_id = ? AND state = ?", sessionID, interactionID, InteractionOpen).
		Updates(map[string]any{"state": closedState, "closure_reason": closedReason, "closed_at": gormExpr("now()")})
	if res.Error != nil {
		return false, mapError("close interaction", res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	_, err := s.GetInteractionByID(ctx, sessionID, interactionID)
	return false, err
}

// ExpireOpenInteractions closes every open interaction of the Session as expired:
// reconciliation for interactions the lost runtime left without a closure receipt.
// It returns the ids it closed.
func (s *Store) ExpireOpenInteractions(ctx context.Context, sessionID, reason string) ([]string, error) {
	var closed []Interaction
	err := scanRaw(s.conn(ctx), &closed, `
		UPDATE interactions SET state = ?, closure_reason = ?, closed_at = now()
		WHERE session_id = ? AND state = ?
		RETURNING *`, InteractionExpired, reason, sessionID, InteractionOpen)
	if err != nil {
		return nil, mapError("expire open interactions", err)
	}
	ids := make([]string, len(closed))
	for i, c := range closed {
		ids[i] = c.InteractionID
	}
	return ids, nil
}

// GetInteractionByID returns one interaction.
func (s *Store) GetInteractionByID(ctx context.Context, sessionID, interactionID string) (Interaction, error) {
	var it Interaction
	err := s.conn(ctx).Where("session_id = ? AND interaction_id = ?", sessionID, interactionID).Take(&it).Error
	return it, mapError("get interaction by id", err)
}

// ListOpenInteractions returns the Session's open interactions by opening time.
func (s *Store) ListOpenInteractions(ctx context.Context, sessionID string) ([]Interaction, error) {
	var out []Interaction
	err := s.conn(ctx).Where("session_id = ? AND state = ?", sessionID, InteractionOpen).Order("opened_at, interaction_id").Find(&out).Error
	return out, mapError("list open interactions", err)
}
