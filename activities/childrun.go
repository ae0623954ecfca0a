package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// StopChildRun asks the live runtime to stop one child run by the control reference
// its reported facts carry. The child run's new status arrives later through the
// program's own child-run reports, so nothing is written here. A child run that cannot
// be stopped fails with ErrTypeChildRunNotStoppable; a lost connection fails with
// ErrTypeNoLiveRuntime so the workflow keeps the request for the next connection.
func (a *Activities) StopChildRun(ctx context.Context, req StopChildRunRequest) error {
	l, err := a.live.get(req.SessionID, req.RuntimeGeneration)
	if err != nil {
		return err
	}
	run, err := a.deps.Store.GetChildRunByID(ctx, req.SessionID, req.ChildRunID)
	if errors.Is(err, store.ErrNotFound) {
		return notStoppable(fmt.Sprintf("child run %s is unknown", req.ChildRunID), err)
	}
	if err != nil {
		return fmt.Errorf("load child run %s: %w", req.ChildRunID, err)
	}
	if run.ControlRef == nil || *run.ControlRef == "" {
		return notStoppable(fmt.Sprintf("child run %s has no control reference", run.ID), nil)
	}
	stopper, ok := l.client.(engines.ChildRunStopper)
	if !ok {
		return notStoppable(fmt.Sprintf("the %s runtime client cannot stop child runs", l.client.EngineKind()), nil)
	}
	err = stopper.StopChildRun(ctx, *run.ControlRef)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engines.ErrChildRunNotStoppable):
		return notStoppable(fmt.Sprintf("stop child run %s: %v", run.ID, err), err)
	case errors.Is(err, engines.ErrRuntimeConnectionLost):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("stop child run %s: %v", run.ID, err), ErrTypeNoLiveRuntime, err)
	default:
		return fmt.Errorf("stop child run %s: %w", run.ID, err)
	}
}

func notStoppable(msg string, cause error) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeChildRunNotStoppable, cause)
}
