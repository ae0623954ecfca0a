package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// Deliver hands the Session's deliverable inputs to the live runtime in accepted
// order: pending ones, and ones an earlier (replaced) runtime received but never
// admitted. Submit is idempotent by input id, so a retried Deliver is harmless; an
// input already delivered to this runtime is not sent to it again.
func (a *Activities) Deliver(ctx context.Context, ref RuntimeRef) (DeliverResult, error) {
	l, err := a.live.get(ref.SessionID, ref.RuntimeGeneration)
	if err != nil {
		return DeliverResult{}, err
	}
	return a.deliverHeld(ctx, l, 0)
}

// deliverHeld reads the inputs held for the runtime and hands them over in accepted
// order, recording them delivered before it returns. committedThrough is a seq whose
// input committed before this call (0 when none is known): once the read's inputs
// are handed over, every input up to it is.
func (a *Activities) deliverHeld(ctx context.Context, l *liveRuntime, committedThrough int64) (DeliverResult, error) {
	l.deliverMu.Lock()
	defer l.deliverMu.Unlock()
	// An input handed over on notice whose record is being written would be read
	// as pending.
	if err := a.awaitDeliveryWriter(ctx, l); err != nil {
		return DeliverResult{}, err
	}
	// A take-back recorded from here on is seen by the next hand-over; one recorded
	// before is in this read.
	l.tookBack.Store(false)
	inputs, err := a.deps.Store.ListDeliverableInputs(ctx, l.sessionID, l.generation)
	if err != nil {
		return DeliverResult{}, err
	}
	var res DeliverResult
	for _, in := range inputs {
		delivered, err := a.handOver(ctx, l, in)
		if err != nil {
			return res, err
		}
		if delivered {
			res.Delivered = append(res.Delivered, in.ID)
			a.metrics.InputsHandedOver.WithLabelValues(handedFromRead).Inc()
		} else {
			res.Refused = append(res.Refused, in.ID)
		}
	}
	if err := a.writeDeliveries(ctx, l, l.records.take()); err != nil {
		// Unrecorded, the inputs are read again by the next hand-over.
		l.tookBack.Store(true)
		return res, err
	}
	l.handedThrough = max(l.handedThrough, committedThrough)
	return res, nil
}

// How an input reached the runtime, as InputsHandedOver counts it: from its
// notification's own content, or from a read of the held inputs.
const (
	handedFromNotice = "notice"
	handedFromRead   = "read"
)

// handOverNoticed hands over the input a notice announces without reading it back
// when the notice carries its content and its seq follows the last input handed
// over, which a read of the held inputs would list first. It reports whether the
// input needs nothing more: handed over now (its record written soon after) or
// already; false leaves it to a read.
func (a *Activities) handOverNoticed(ctx context.Context, l *liveRuntime, n pubsub.InputNotice) (bool, error) {
	l.deliverMu.Lock()
	defer l.deliverMu.Unlock()
	if l.tookBack.Load() {
		return false, nil
	}
	if n.Seq <= l.handedThrough {
		return true, nil
	}
	if n.Seq != l.handedThrough+1 || !n.Carried {
		return false, nil
	}
	delivered, err := a.handOver(ctx, l, store.Input{ID: n.ID, SessionID: l.sessionID, Seq: n.Seq, Content: n.Content})
	if err != nil {
		return false, err
	}
	if delivered {
		a.metrics.InputsHandedOver.WithLabelValues(handedFromNotice).Inc()
		a.writeDeliveriesSoon(ctx, l)
	}
	return true, nil
}

// handOver submits one input to the runtime and keeps the outcome: delivered to this
// runtime (its record left to the caller, in l.records), or refused by it (failed,
// reported on the stream). Either way every input up to its seq is then handed
// over. It reports whether the runtime took it. The caller holds l.deliverMu.
func (a *Activities) handOver(ctx context.Context, l *liveRuntime, in store.Input) (bool, error) {
	err := l.client.Submit(ctx, engines.TextInput(in.ID, in.Content))
	var refused *engines.RuntimeInputRefused
	switch {
	case errors.As(err, &refused):
		if err := a.refuseInput(ctx, l, in, refused); err != nil {
			return false, err
		}
		l.handedThrough = in.Seq
		return false, nil
	case errors.Is(err, engines.ErrRuntimeConnectionLost):
		return false, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoLiveRuntime, err)
	case err != nil:
		return false, fmt.Errorf("submit input %s: %w", in.ID, err)
	}
	l.records.add(in.ID)
	l.handedThrough = in.Seq
	return true, nil
}

// refuseInput records the runtime's refusal with the input and reports it on the
// stream as a data-input-failed part, in one transaction: the report is the
// platform's, so it does not wait for a reader to hold the lease.
func (a *Activities) refuseInput(ctx context.Context, l *liveRuntime, in store.Input, refused *engines.RuntimeInputRefused) error {
	_, err := a.deps.Store.FailInputReported(ctx, l.sessionID, in.ID, refused.Code, refused.Message)
	return err
}

// Answer passes the answer saved with an interaction to the runtime. The interaction
// stays open in PostgreSQL until the runtime reports it closed.
func (a *Activities) Answer(ctx context.Context, req AnswerRequest) error {
	l, err := a.live.get(req.SessionID, req.RuntimeGeneration)
	if err != nil {
		return err
	}
	it, err := a.deps.Store.GetInteractionByID(ctx, req.SessionID, req.InteractionID)
	if err != nil {
		return sessionErr(err)
	}
	if it.State != store.InteractionOpen || len(it.Answer) == 0 {
		return nil // closed already, or no answer saved: nothing to pass on
	}
	var answer engines.InteractionAnswer
	if err := json.Unmarshal(it.Answer, &answer); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("decode saved answer: %v", err), ErrTypeConfiguration, err)
	}
	err = l.client.Answer(ctx, req.InteractionID, answer)
	if errors.Is(err, engines.ErrInteractionNotOpen) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInteractionNotOpen, err)
	}
	return err
}

// Interrupt asks the runtime to stop the response in progress (and, with
// CancelQueued, the inputs it queued behind it). The runtime reports how it ended.
func (a *Activities) Interrupt(ctx context.Context, req InterruptRequest) error {
	l, err := a.live.get(req.SessionID, req.RuntimeGeneration)
	if err != nil {
		return err
	}
	return l.client.Interrupt(ctx, req.CancelQueued)
}
