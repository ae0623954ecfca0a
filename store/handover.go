package store

import (
	"cmp"
	"context"
	"slices"

	"gorm.io/gorm/clause"
)

// InputFailureConversationEnded is the failure code of inputs still held when their
// Session was archived or deleted.
const InputFailureConversationEnded = "CONVERSATION_ENDED"

// ListDeliverableInputs returns the inputs to hand to the runtime of generation
// runtimeGeneration, in accepted order: pending inputs, and inputs delivered to an
// earlier runtime that never admitted them (a replacement receives them). An input
// already delivered to this generation is not listed, so it is never sent twice to
// the same runtime; admitted and failed inputs are never listed. An archived or
// deleted Session lists nothing: its runtime may still be live while the workflow
// tears it down, and its held inputs are to fail with CONVERSATION_ENDED rather
// than run.
func (s *Store) ListDeliverableInputs(ctx context.Context, sessionID string, runtimeGeneration int64) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).
		Where("session_id = ?", sessionID).
		Where("NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.id = inputs.session_id AND (sessions.archived_at IS NOT NULL OR sessions.lifecycle = ?))", LifecycleDeleted).
		Where("state = ? OR (state = ? AND (delivered_runtime_generation IS NULL OR delivered_runtime_generation < ?))",
			InputPending, InputDelivered, runtimeGeneration).
		Order("seq").Find(&out).Error
	return out, mapError("list deliverable inputs", err)
}

// MarkInputsDeliveredTo records that the runtime of runtimeGeneration received the
// inputs (pending, or delivered to an earlier runtime -> delivered), in one
// statement, and returns how many moved. An input admitted or failed meanwhile, or
// recorded delivered to a later runtime, is left alone: a late record never moves
// custody back.
func (s *Store) MarkInputsDeliveredTo(ctx context.Context, sessionID string, inputIDs []string, runtimeGeneration int64) (int64, error) {
	if len(inputIDs) == 0 {
		return 0, nil
	}
	res := s.conn(ctx).Model(&Input{}).
		Where("session_id = ? AND id IN ? AND state IN ?", sessionID, inputIDs, []string{InputPending, InputDelivered}).
		Where("coalesce(delivered_runtime_generation, 0) <= ?", runtimeGeneration).
		Updates(map[string]any{
			"state":                        InputDelivered,
			"delivered_at":                 gormExpr("now()"),
			"delivered_runtime_generation": runtimeGeneration,
		})
	return res.RowsAffected, mapError("mark inputs delivered", res.Error)
}

// FailHeldInputs fails every held input of the Session with code and returns their
// ids in accepted order. Archive and delete use it with InputFailureConversationEnded.
func (s *Store) FailHeldInputs(ctx context.Context, sessionID, code, message string) ([]string, error) {
	var failed []Input
	res := s.conn(ctx).Model(&failed).Clauses(clause.Returning{Columns: []clause.Column{{Name: "id"}, {Name: "seq"}}}).
		Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).
		Updates(map[string]any{
			"state":           InputFailed,
			"failure_code":    code,
			"failure_message": message,
			"failed_at":       gormExpr("now()"),
		})
	if res.Error != nil {
		return nil, mapError("fail held inputs", res.Error)
	}
	slices.SortFunc(failed, func(a, b Input) int { return cmp.Compare(a.Seq, b.Seq) })
	ids := make([]string, 0, len(failed))
	for _, in := range failed {
		ids = append(ids, in.ID)
	}
	return ids, nil
}

// takeBackInputs makes delivered, unadmitted inputs deliverable again, except those in
// keep (the runtime still queues them): the runtime received them but can no longer
// answer them. They stay delivered (custody moves only forward); clearing the runtime
// generation that received them is what lists them for the next hand-over.
func (s *Store) takeBackInputs(ctx context.Context, sessionID string, keep []string) error {
	q := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND state = ?", sessionID, InputDelivered)
	if len(keep) > 0 {
		q = q.Where("id::text NOT IN ?", keep)
	}
	err := q.Update("delivered_runtime_generation", nil).Error
	return mapError("take back inputs", err)
}

// GetInputByID returns one input.
func (s *Store) GetInputByID(ctx context.Context, id string) (Input, error) {
	var in Input
	err := s.conn(ctx).Where("id = ?", id).Take(&in).Error
	return in, mapError("get input by id", err)
}
