package activities

import (
	"context"
	"fmt"
	"slices"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// reconcile settles the records with the runtime's own account after expired, a
// cursor the runtime refused (RuntimeCursorExpired): inputs the runtime received but
// never admitted are taken back (except those it still queues), admitted ids close
// custody, a response it no longer reports ends failed (runtime_lost), and an
// interaction it no longer waits on closes with its retained closure reason or as
// expired. It returns the cursor to read on from (continueFrom).
func (r *relayRun) reconcile(ctx context.Context, expired *engines.RuntimeCursor) (*engines.RuntimeCursor, error) {
	// No input is handed over while the records are settled, and every one handed
	// over before is recorded delivered first: a record written after the take-back
	// would name this runtime for an input its State says it lost.
	r.l.deliverMu.Lock()
	defer r.l.deliverMu.Unlock()
	if err := r.a.awaitDeliveryWriter(ctx, r.l); err != nil {
		return nil, fmt.Errorf("await delivery records: %w", err)
	}
	state, err := r.l.client.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("read runtime state: %w", err)
	}
	if err := state.Validate(); err != nil {
		return nil, fmt.Errorf("runtime state: %w", err)
	}
	rec, err := r.a.settlement(ctx, r.l.sessionID, r.lease, &state)
	if err != nil {
		return nil, err
	}
	if len(rec.AdmitInputs) > 0 {
		// The session-log barrier holds here too: admissions the runtime reports in
		// its State are recorded only once the mirror covers its native log.
		if err := r.a.mirrorSessionLog(ctx, r.l); err != nil {
			return nil, fmt.Errorf("mirror session log before recording admissions: %w", err)
		}
	}
	next := continueFrom(expired, state)
	if next != nil {
		rec.Cursor = cursorUpdate(*next)
	}
	res, err := r.a.deps.Store.ReconcileRuntime(ctx, rec)
	if err != nil {
		return nil, err
	}
	// Inputs taken back are to be handed over again before any later one.
	r.l.tookBack.Store(true)
	r.a.metrics.Admitted(res.Admitted)
	r.a.metrics.PartsCommitted.Add(float64(res.Parts))
	r.throughSeq.Store(res.LastSeq)
	return next, nil
}

// continueFrom is where reading resumes after reconciliation. A cursor of another
// incarnation than the one connected means the platform recorded nothing of this one
// (a cursor is committed with the parts it produced), so every event it has is new:
// read it from its start. A response it began before this reader connected (an input
// handed over while the reader was starting) is then recorded from its start part,
// instead of being met first at its end. Within one incarnation the expired position
// is gone, and reading continues where the runtime's State says.
func continueFrom(expired *engines.RuntimeCursor, state engines.RuntimeState) *engines.RuntimeCursor {
	if expired != nil && state.Cursor != nil && expired.Generation != state.Cursor.Generation {
		return nil
	}
	return state.Cursor
}

// settlement builds the Reconciliation of the Session's open records against state;
// a nil state means the runtime is confirmed lost, so nothing of it stays open.
func (a *Activities) settlement(ctx context.Context, sessionID string, lease int64, state *engines.RuntimeState) (store.Reconciliation, error) {
	rec := store.Reconciliation{SessionID: sessionID, LeaseGeneration: lease, TakeBack: true}
	open, err := a.deps.Store.ListOpenResponses(ctx, sessionID)
	if err != nil {
		return rec, err
	}
	var stillOpen, pending []string
	closed := map[string]engines.InteractionClosure{}
	if state != nil {
		for _, o := range state.OpenResponses {
			stillOpen = append(stillOpen, o.ResponseID)
		}
		for _, p := range state.PendingInteractions {
			pending = append(pending, p.InteractionID)
		}
		for _, c := range state.ClosedInteractions {
			closed[c.InteractionID] = c.Reason
		}
		rec.AdmitInputs = state.AdmittedInputIDs
		rec.KeepQueued = state.QueuedInputIDs
		rec.Status = string(state.Status)
	}
	for _, resp := range open {
		if slices.Contains(stillOpen, resp.ResponseID) {
			continue
		}
		f, err := lostResponse(resp.ResponseID)
		if err != nil {
			return rec, err
		}
		rec.FailResponses = append(rec.FailResponses, f)
	}
	interactions, err := a.deps.Store.ListOpenInteractions(ctx, sessionID)
	if err != nil {
		return rec, err
	}
	for _, it := range interactions {
		if slices.Contains(pending, it.InteractionID) {
			continue
		}
		reason, ok := closed[it.InteractionID]
		if !ok {
			reason = engines.ClosureExpired
		}
		rec.CloseInteractions = append(rec.CloseInteractions, store.InteractionClosing{InteractionID: it.InteractionID, State: string(reason), Reason: string(reason)})
	}
	return rec, nil
}

// ReconcileLostRuntime settles the records of a runtime whose box is confirmed lost:
// the open response ends failed with native_reason runtime_lost, open interactions
// close as expired (no runtime is left to hold a receipt), delivered but unadmitted
// inputs return to custody for the replacement, and the runtime is recorded
// unavailable. It takes the reader lease first, fencing any reader still running.
func (a *Activities) ReconcileLostRuntime(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	lease, err := a.deps.Store.AcquireReaderLease(ctx, store.LeaseRequest{
		SessionID: req.SessionID, Holder: a.deps.HostTaskQueue + "/reconcile", TTL: a.set.LeaseTTL, Steal: true,
	})
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("acquire reader lease: %w", err)
	}
	rec, err := a.settlement(ctx, req.SessionID, lease.Generation, nil)
	if err != nil {
		return ReconcileResult{}, err
	}
	if _, err := a.deps.Store.ReconcileRuntime(ctx, rec); err != nil {
		return ReconcileResult{}, err
	}
	a.live.removeSession(req.SessionID)
	// The stolen lease ended any Relay's hand-over on notice; the held inputs go to
	// the replacement runtime, which the workflow brings up next. Those accepted while
	// a Relay took them on notice came without a signal: when no Release cleared the
	// record first (it failed), only this count tells the workflow of them.
	held, err := a.deps.Store.ReleaseSessionRuntime(ctx, req.SessionID)
	return ReconcileResult{HeldOnNotice: held}, err
}
