package store

import (
	"context"
	"fmt"
)

// RelayOp is one fact of a runtime event a Relay records. Exactly one field is set;
// the Relay leaves the Session id and seqs of the facts to ApplyRelayBatch.
type RelayOp struct {
	// AdmitInput closes custody of an input.
	AdmitInput string
	// StartResponse records a response start (or the complete input ids of a
	// response another input joined).
	StartResponse *ResponseStart
	// Part appends one browser part to the output log.
	Part *NewPart
	// OpenInteraction records an interaction a response waits on.
	OpenInteraction *InteractionOpening
	// CloseInteraction records that the runtime no longer waits on an interaction.
	CloseInteraction *InteractionClosing
	// EndResponse records how a response ended.
	EndResponse *ResponseEnd
	// Status is the runtime's own status (idle, working, waiting).
	Status string
	// ChildRun records a child run's lifecycle report (a data-subagent part with a
	// run), by its public id; the Part op of the same report comes with it.
	ChildRun *ChildRunReport
	// Diagnostic keeps a runtime diagnostic for operators (bounded per Session).
	Diagnostic *DiagnosticRecord
}

// InteractionClosing is InteractionClosed as the runtime reported it: the state it
// closes to (answered, withdrawn or expired) and the runtime's reason.
type InteractionClosing struct {
	InteractionID string
	State         string
	Reason        string
}

// RelayBatch is the facts of consecutive runtime events, written at once.
type RelayBatch struct {
	SessionID       string
	LeaseGeneration int64
	Ops             []RelayOp
	// Cursor is the cursor after the batch's last event, committed with it.
	Cursor *CursorUpdate
}

// ApplyRelayBatch records a Relay's batch in one transaction fenced by its lease
// generation (InLeaseTx): admissions, responses, interactions, status, child runs, diagnostics
// and parts, with
// the cursor after the last event and a NOTIFY at commit. A superseded generation
// writes nothing and gets ErrLeaseLost, so a zombie Relay cannot write.
func (s *Store) ApplyRelayBatch(ctx context.Context, b RelayBatch) (AppendResult, error) {
	var result AppendResult
	err := s.InLeaseTx(ctx, b.SessionID, b.LeaseGeneration, func(tx *Store) error {
		sess, err := tx.lockSession(ctx, b.SessionID)
		if err != nil {
			return err
		}
		next := sess.OutputSeq + 1 // the seq the next part of this batch gets
		var parts []NewPart
		for _, op := range b.Ops {
			if err := tx.applyOp(ctx, b.SessionID, op, next); err != nil {
				return err
			}
			if op.Part != nil {
				parts = append(parts, *op.Part)
				next++
			}
		}
		// The lease row is locked already: append within this transaction, without
		// AppendParts' own fencing (a savepoint and a second lock per batch).
		result, err = tx.appendLocked(ctx, AppendRequest{SessionID: b.SessionID, LeaseGeneration: b.LeaseGeneration, Parts: parts, Cursor: b.Cursor})
		return err
	})
	if err != nil {
		return AppendResult{}, fmt.Errorf("apply relay batch: %w", err)
	}
	return result, nil
}

// applyOp writes one fact; nextSeq is the seq the next part will get.
func (s *Store) applyOp(ctx context.Context, sessionID string, op RelayOp, nextSeq int64) error {
	switch {
	case op.AdmitInput != "":
		_, err := s.MarkInputsAdmitted(ctx, sessionID, []string{op.AdmitInput})
		return err
	case op.StartResponse != nil:
		in := *op.StartResponse
		in.SessionID, in.StartedSeq = sessionID, nextSeq
		_, _, err := s.StartResponse(ctx, in)
		return err
	case op.OpenInteraction != nil:
		in := *op.OpenInteraction
		in.SessionID = sessionID
		_, _, err := s.OpenInteraction(ctx, in)
		return err
	case op.CloseInteraction != nil:
		c := op.CloseInteraction
		_, err := s.CloseInteraction(ctx, sessionID, c.InteractionID, c.State, c.Reason)
		return err
	case op.EndResponse != nil:
		in := *op.EndResponse
		in.SessionID, in.EndedSeq = sessionID, nextSeq-1
		_, err := s.EndResponse(ctx, in)
		return err
	case op.Status != "":
		return s.SetRuntimeStatus(ctx, sessionID, op.Status)
	case op.ChildRun != nil:
		return s.recordReportedChildRun(ctx, sessionID, *op.ChildRun)
	case op.Diagnostic != nil:
		return s.appendDiagnostic(ctx, sessionID, *op.Diagnostic)
	}
	return nil
}

// recordReportedChildRun upserts a child run the Agent program reported. A parent not
// recorded yet is left out rather than failing the batch (a failed batch would stall
// the Relay on a program's ordering): every report of the child names its parent, so
// a later one fills it in.
func (s *Store) recordReportedChildRun(ctx context.Context, sessionID string, r ChildRunReport) error {
	r.SessionID = sessionID
	if r.ParentID != nil {
		var n int64
		if err := s.conn(ctx).Model(&ChildRun{}).Where("session_id = ? AND id = ?", sessionID, *r.ParentID).Count(&n).Error; err != nil {
			return mapError("find parent child run", err)
		}
		if n == 0 {
			r.ParentID = nil
		}
	}
	_, err := s.upsertChildRun(ctx, r)
	return err
}
