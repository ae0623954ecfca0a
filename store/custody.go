package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm/clause"
)

// Input failure codes the orchestration records.
const (
	// InputFailureConversationEnded: the Session was archived or deleted while the
	// input was still held.
	InputFailureConversationEnded = "CONVERSATION_ENDED"
)

// ListDeliverableInputs returns the inputs to hand to the runtime of generation
// runtimeGeneration, in accepted order: pending inputs, and inputs delivered to an
// earlier runtime that was never admitted (a replacement receives them). An input
// already delivered to this generation is not listed, so it is never sent twice to the
// same runtime; admitted and failed inputs are never listed.
func (s *Store) ListDeliverableInputs(ctx context.Context, sessionID string, runtimeGeneration int64) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).
		Where("session_id = ?", sessionID).
		Where("state = ? OR (state = ? AND (delivered_runtime_generation IS NULL OR delivered_runtime_generation < ?))",
			InputPending, InputDelivered, runtimeGeneration).
		Order("seq").Find(&out).Error
	return out, mapError("list deliverable inputs", err)
}

// ListHeldInputs returns the inputs accepted but not yet admitted (pending or
// delivered), in accepted order.
func (s *Store) ListHeldInputs(ctx context.Context, sessionID string) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).
		Order("seq").Find(&out).Error
	return out, mapError("list held inputs", err)
}

// MarkInputDelivered records that the runtime of runtimeGeneration received the input.
// An input that was admitted or failed meanwhile is left alone (false).
func (s *Store) MarkInputDelivered(ctx context.Context, inputID string, runtimeGeneration int64) (bool, error) {
	res := s.conn(ctx).Model(&Input{}).
		Where("id = ? AND state IN ?", inputID, []string{InputPending, InputDelivered}).
		Updates(map[string]any{
			"state":                        InputDelivered,
			"delivered_at":                 gormExpr("now()"),
			"delivered_runtime_generation": runtimeGeneration,
		})
	if res.Error != nil {
		return false, mapError("mark input delivered", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// FailInput records that an input will not run (the runtime refused it). Only a held
// input can fail; the return says whether this call failed it.
func (s *Store) FailInput(ctx context.Context, inputID, code, message string) (bool, error) {
	res := s.conn(ctx).Model(&Input{}).
		Where("id = ? AND state IN ?", inputID, []string{InputPending, InputDelivered}).
		Updates(map[string]any{
			"state":           InputFailed,
			"failure_code":    code,
			"failure_message": message,
			"failed_at":       gormExpr("now()"),
		})
	if res.Error != nil {
		return false, mapError("fail input", res.Error)
	}
	return res.RowsAffected == 1, nil
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
	ids := make([]string, 0, len(failed))
	for _, in := range sortedBySeq(failed) {
		ids = append(ids, in.ID)
	}
	return ids, nil
}

// GetInputByID returns one input.
func (s *Store) GetInputByID(ctx context.Context, id string) (Input, error) {
	var in Input
	err := s.conn(ctx).Where("id = ?", id).Take(&in).Error
	return in, mapError("get input by id", err)
}

// admitInputs closes custody of the given inputs: each held one becomes admitted.
// Unknown, failed or already admitted ids are left alone (an admission can be
// reported twice after a reader takes over).
func (s *Store) admitInputs(ctx context.Context, sessionID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.conn(ctx).Model(&Input{}).
		Where("session_id = ? AND id::text IN ? AND state IN ?", sessionID, ids, []string{InputPending, InputDelivered}).
		Updates(map[string]any{"state": InputAdmitted, "admitted_at": gormExpr("now()")}).Error
	return mapError("admit inputs", err)
}

// takeBackInputs returns delivered, unadmitted inputs to pending except those listed
// in keep (the runtime still queues them): the runtime received them but can no longer
// answer them, so they are handed over again.
func (s *Store) takeBackInputs(ctx context.Context, sessionID string, keep []string) error {
	q := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND state = ?", sessionID, InputDelivered)
	if len(keep) > 0 {
		q = q.Where("id::text NOT IN ?", keep)
	}
	err := q.Updates(map[string]any{"state": InputPending, "delivered_runtime_generation": nil}).Error
	return mapError("take back inputs", err)
}

func sortedBySeq(in []Input) []Input {
	slices.SortFunc(in, func(a, b Input) int { return cmp.Compare(a.Seq, b.Seq) })
	return in
}

// errNoRows formats a missing-row error for one Session.
func errNoRows(what, sessionID string) error {
	return fmt.Errorf("%s of session %s: %w", what, sessionID, ErrNotFound)
}
