package store

import (
	"context"
	"fmt"
	"time"
)

// The custody life of an input: pending (accepted) -> delivered (the runtime received
// it) -> admitted (the runtime durably holds it), or failed (refused with a reason).
// Moves only go forward: a late or repeated receipt never moves an input back, and
// an admitted input never fails.

// ListHeldInputsBySession returns the inputs the runtime has not admitted (pending or
// delivered), in accepted order: what a replacement runtime must receive, and what a
// Session's details show as held.
func (s *Store) ListHeldInputsBySession(ctx context.Context, sessionID string) ([]Input, error) {
	var out []Input
	err := s.conn(ctx).Where("session_id = ? AND state IN ?", sessionID, []string{InputPending, InputDelivered}).
		Order("seq").Find(&out).Error
	return out, mapError("list held inputs", err)
}

// MarkInputDelivered records the runtime's delivery receipt (pending -> delivered)
// and reports whether the input moved.
func (s *Store) MarkInputDelivered(ctx context.Context, sessionID, inputID string) (bool, error) {
	res := s.conn(ctx).Model(&Input{}).
		Where("session_id = ? AND id = ? AND state = ?", sessionID, inputID, InputPending).
		Updates(map[string]any{"state": InputDelivered, "delivered_at": gormExpr("now()")})
	return s.inputMoved(ctx, "mark input delivered", sessionID, inputID, res.RowsAffected, res.Error)
}

// MarkInputsAdmitted records InputAdmitted for each input (pending or delivered ->
// admitted); after this the inputs are never handed to a runtime again. It returns
// how many moved; already admitted inputs are skipped.
func (s *Store) MarkInputsAdmitted(ctx context.Context, sessionID string, inputIDs []string) (int64, error) {
	custody, err := s.AdmitInputs(ctx, sessionID, inputIDs)
	return int64(len(custody)), err
}

// admitInputsSQL moves inputs ($2: the Session, $3: their ids) that are pending or
// delivered to admitted and returns, for each it moved, its time in custody
// (acceptance to admission, on the database's clock) in seconds.
const admitInputsSQL = `
UPDATE inputs SET state = $1, admitted_at = now()
WHERE session_id = $2 AND id = ANY($3) AND state = ANY($4)
RETURNING EXTRACT(EPOCH FROM admitted_at - accepted_at)::float8`

// admitInputsArgs are admitInputsSQL's arguments.
func admitInputsArgs(sessionID string, inputIDs []string) []any {
	return []any{InputAdmitted, sessionID, inputIDs, []string{InputPending, InputDelivered}}
}

// custodyDurations turns admitInputsSQL's seconds into durations.
func custodyDurations(seconds []float64) []time.Duration {
	out := make([]time.Duration, len(seconds))
	for i, sec := range seconds {
		out[i] = time.Duration(sec * float64(time.Second))
	}
	return out
}

// AdmitInputs is MarkInputsAdmitted returning, for each input it moved, how long the
// input was in custody (acceptance to admission, on the database's clock), for the
// custody metrics.
func (s *Store) AdmitInputs(ctx context.Context, sessionID string, inputIDs []string) ([]time.Duration, error) {
	if len(inputIDs) == 0 {
		return nil, nil
	}
	var seconds []float64
	if err := scanRaw(s.conn(ctx), &seconds, admitInputsSQL, admitInputsArgs(sessionID, inputIDs)...); err != nil {
		return nil, mapError("mark inputs admitted", err)
	}
	return custodyDurations(seconds), nil
}

// MarkInputFailed records a refusal (pending or delivered -> failed) with the
// product's code and the reason, and reports whether the input moved.
func (s *Store) MarkInputFailed(ctx context.Context, sessionID, inputID, code, message string) (bool, error) {
	if code == "" {
		return false, fmt.Errorf("mark input failed: a failure code is required")
	}
	res := s.conn(ctx).Model(&Input{}).
		Where("session_id = ? AND id = ? AND state IN ?", sessionID, inputID, []string{InputPending, InputDelivered}).
		Updates(map[string]any{"state": InputFailed, "failure_code": code, "failure_message": message, "failed_at": gormExpr("now()")})
	return s.inputMoved(ctx, "mark input failed", sessionID, inputID, res.RowsAffected, res.Error)
}

// inputMoved turns an update's outcome into (moved, error): no row moved is fine for
// an input further along, and ErrNotFound for an unknown one.
func (s *Store) inputMoved(ctx context.Context, what, sessionID, inputID string, rows int64, err error) (bool, error) {
	if err != nil {
		return false, mapError(what, err)
	}
	if rows > 0 {
		return true, nil
	}
	var n int64
	if err := s.conn(ctx).Model(&Input{}).Where("session_id = ? AND id = ?", sessionID, inputID).Count(&n).Error; err != nil {
		return false, mapError(what, err)
	}
	if n == 0 {
		return false, fmt.Errorf("%s %s: %w", what, inputID, ErrNotFound)
	}
	return false, nil
}
