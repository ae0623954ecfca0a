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

// openInteractionSQL records an open interaction; a replayed opening changes nothing.
const openInteractionSQL = `
INSERT INTO interactions (session_id, interaction_id, response_id, contract, state)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (session_id, interaction_id) DO NOTHING`

// openInteractionArgs are openInteractionSQL's arguments.
func openInteractionArgs(in InteractionOpening) []any {
	return []any{in.SessionID, in.InteractionID, in.ResponseID, in.Contract, InteractionOpen}
}

// OpenInteraction records an interaction the runtime waits on and reports whether it
// was new; a replayed opening changes nothing.
func (s *Store) OpenInteraction(ctx context.Context, in InteractionOpening) (Interaction, bool, error) {
	res := s.conn(ctx).Exec(openInteractionSQL, openInteractionArgs(in)...)
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

// closeInteractionSQL closes an open interaction ($3: answered, withdrawn or expired,
// $4: the runtime's reason). An answered closure counts only when an answer was saved
// first; otherwise it is recorded withdrawn with ClosureAnsweredWithoutAnswer ($6). It
// returns how many it closed and whether the interaction is known at all.
const closeInteractionSQL = `
WITH closed AS (
	UPDATE interactions SET
		state = CASE WHEN $3 = $5 AND answer_saved_at IS NULL THEN $7 ELSE $3 END,
		closure_reason = CASE WHEN $3 = $5 AND answer_saved_at IS NULL THEN $6 ELSE $4 END,
		closed_at = now()
	WHERE session_id = $1 AND interaction_id = $2 AND state = $8
	RETURNING 1
)
SELECT (SELECT count(*) FROM closed) AS closed,
	EXISTS (SELECT 1 FROM interactions WHERE session_id = $1 AND interaction_id = $2) AS known`

// closeInteractionArgs are closeInteractionSQL's arguments.
func closeInteractionArgs(sessionID, interactionID, state, reason string) []any {
	return []any{sessionID, interactionID, state, reason, InteractionAnswered, ClosureAnsweredWithoutAnswer, InteractionWithdrawn, InteractionOpen}
}

// closedOrUnknown reads closeInteractionSQL's row: whether the interaction closed
// now, and ErrNotFound for an unknown one.
func closedOrUnknown(interactionID string, closed int64, known bool) (bool, error) {
	if closed == 0 && !known {
		return false, fmt.Errorf("close interaction %s: %w", interactionID, ErrNotFound)
	}
	return closed > 0, nil
}

// CloseInteraction records InteractionClosed: open -> state (answered, withdrawn or
// expired) with the runtime's reason. An answered closure counts only when an answer
// was saved first; otherwise it is recorded withdrawn with
// ClosureAnsweredWithoutAnswer. It reports false when it was already closed.
func (s *Store) CloseInteraction(ctx context.Context, sessionID, interactionID, state, reason string) (bool, error) {
	var row struct {
		Closed int64
		Known  bool
	}
	err := scanRaw(s.conn(ctx), &row, closeInteractionSQL, closeInteractionArgs(sessionID, interactionID, state, reason)...)
	if err != nil {
		return false, mapError("close interaction", err)
	}
	return closedOrUnknown(interactionID, row.Closed, row.Known)
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
