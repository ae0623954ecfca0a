package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// FailedResponse is an open response reconciliation ends as failed (runtime_lost),
// with the parts that close its UI message (an error part, then a finish part).
type FailedResponse struct {
	ResponseID string
	Error      json.RawMessage
	Parts      []NewPart
}

// Reconciliation is a reader's settlement of the platform's records with what the
// runtime reports (or with the runtime's confirmed loss), written at once.
type Reconciliation struct {
	SessionID       string
	LeaseGeneration int64
	// FailResponses end as failed with native_reason runtime_lost; one that ended
	// meanwhile is skipped with its parts.
	FailResponses []FailedResponse
	// CloseInteractions close with the runtime's retained reason or as expired.
	CloseInteractions []InteractionClosing
	// AdmitInputs close custody of inputs whose InputAdmitted the reader missed.
	AdmitInputs []string
	// TakeBack makes delivered, unadmitted inputs deliverable again, except
	// KeepQueued, the ones the runtime still queues.
	TakeBack   bool
	KeepQueued []string
	// Status replaces the runtime status when set.
	Status string
	// Cursor, when set, is where the reader continues.
	Cursor *CursorUpdate
}

// ReconcileRuntime writes a Reconciliation in one transaction fenced by the reader's
// lease generation, with a NOTIFY for the parts at commit.
func (s *Store) ReconcileRuntime(ctx context.Context, r Reconciliation) (AppendResult, error) {
	var result AppendResult
	err := s.InLeaseTx(ctx, r.SessionID, r.LeaseGeneration, func(tx *Store) error {
		sess, err := tx.lockSession(ctx, r.SessionID)
		if err != nil {
			return err
		}
		next := sess.OutputSeq + 1
		var parts []NewPart
		reason := NativeReasonRuntimeLost
		for _, f := range r.FailResponses {
			ended, err := tx.EndResponse(ctx, ResponseEnd{
				SessionID: r.SessionID, ResponseID: f.ResponseID, Outcome: OutcomeFailed,
				NativeReason: &reason, Error: f.Error, EndedSeq: next + int64(len(f.Parts)) - 1,
			})
			if err != nil {
				return err
			}
			if ended {
				parts = append(parts, f.Parts...)
				next += int64(len(f.Parts))
			}
		}
		for _, c := range r.CloseInteractions {
			if _, err := tx.CloseInteraction(ctx, r.SessionID, c.InteractionID, c.State, c.Reason); err != nil {
				return err
			}
		}
		admitted, err := tx.AdmitInputs(ctx, r.SessionID, r.AdmitInputs)
		if err != nil {
			return err
		}
		if r.TakeBack {
			if err := tx.takeBackInputs(ctx, r.SessionID, r.KeepQueued); err != nil {
				return err
			}
		}
		if r.Status != "" {
			if err := tx.SetRuntimeStatus(ctx, r.SessionID, r.Status); err != nil {
				return err
			}
		}
		result, err = tx.AppendParts(ctx, AppendRequest{SessionID: r.SessionID, LeaseGeneration: r.LeaseGeneration, Parts: parts, Cursor: r.Cursor})
		result.Admitted = admitted
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("reconcile runtime: %w", err)
	}
	return result, nil
}
