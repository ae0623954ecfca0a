package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// FailedResponse is an open response reconciliation ends as failed, with the parts
// that close its UI message (an error part, then a finish part).
type FailedResponse struct {
	ResponseID   string
	NativeReason string
	Error        json.RawMessage
	Parts        []NewPart
}

// Reconciliation is a reader's settlement of the platform's records with what the
// runtime reports (or with the runtime's confirmed loss), written at once.
type Reconciliation struct {
	SessionID       string
	LeaseGeneration int64
	// FailResponses end as failed; one that ended meanwhile is skipped with its parts.
	FailResponses []FailedResponse
	// CloseInteractions close with the runtime's retained reason or as expired.
	CloseInteractions []InteractionClose
	// AdmitInputs close custody of inputs whose InputAdmitted the reader missed.
	AdmitInputs []string
	// TakeBack returns delivered, unadmitted inputs to pending except KeepQueued, the
	// ones the runtime still queues.
	TakeBack   bool
	KeepQueued []string
	// Status replaces the runtime status when set ("idle", "working", "waiting").
	Status string
	// Cursor, when set, is where the reader continues.
	Cursor *CursorUpdate
}

// ReconcileRuntime writes a Reconciliation in one transaction fenced by the reader's
// lease generation, with a NOTIFY for the parts at commit.
func (s *Store) ReconcileRuntime(ctx context.Context, r Reconciliation) (AppendResult, error) {
	var result AppendResult
	err := s.InTx(ctx, func(tx *Store) error {
		if err := tx.checkLease(ctx, r.SessionID, r.LeaseGeneration); err != nil {
			return err
		}
		sess, err := tx.lockSession(ctx, r.SessionID)
		if err != nil {
			return err
		}
		next := sess.OutputSeq + 1
		var parts []NewPart
		for _, f := range r.FailResponses {
			last := next + int64(len(f.Parts)) - 1
			updates := map[string]any{
				"outcome":       "failed",
				"native_reason": f.NativeReason,
				"ended_seq":     gormExpr("GREATEST(started_seq, ?)", last),
				"ended_at":      gormExpr("now()"),
			}
			if len(f.Error) > 0 {
				updates["error"] = f.Error
			}
			res := tx.conn(ctx).Model(&Response{}).Where("session_id = ? AND response_id = ? AND outcome IS NULL", r.SessionID, f.ResponseID).Updates(updates)
			if res.Error != nil {
				return mapError("fail response", res.Error)
			}
			if res.RowsAffected == 0 {
				continue
			}
			parts = append(parts, f.Parts...)
			next = last + 1
		}
		for _, c := range r.CloseInteractions {
			if err := tx.applyOp(ctx, r.SessionID, RelayOp{CloseInteraction: &c}, next, next-1); err != nil {
				return err
			}
		}
		if err := tx.admitInputs(ctx, r.SessionID, r.AdmitInputs); err != nil {
			return err
		}
		if r.TakeBack {
			if err := tx.takeBackInputs(ctx, r.SessionID, r.KeepQueued); err != nil {
				return err
			}
		}
		if r.Status != "" {
			if err := tx.applyOp(ctx, r.SessionID, RelayOp{Status: r.Status}, next, next-1); err != nil {
				return err
			}
		}
		result, err = tx.AppendParts(ctx, AppendRequest{SessionID: r.SessionID, LeaseGeneration: r.LeaseGeneration, Parts: parts, Cursor: r.Cursor})
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("reconcile runtime: %w", err)
	}
	return result, nil
}
