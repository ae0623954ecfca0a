package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// The permission mode is the one setting the owner changes on a running program, and
// the program may refuse it. The workflow is the one place that knows whether a
// runtime is live, so the mode goes through it (UpdateSetPermissionMode): with a
// runtime live the run loop applies the mode between its other hand-overs and stores
// it once the program accepted it; otherwise the handler stores it and the next
// runtime starts in it.

// modeChange is one request waiting for the run loop to apply it to the live runtime.
// It lives only while its update handler waits, so it is never carried across
// continue-as-new (which waits for every handler to finish).
type modeChange struct {
	mode   string
	done   bool
	result PermissionModeSet
	err    error
}

func (c *modeChange) finish(res PermissionModeSet, err error) {
	c.result, c.err, c.done = res, err, true
}

// registerPermissionMode registers the UpdateSetPermissionMode handler and its validator.
func (w *sessionWorkflow) registerPermissionMode(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetPermissionMode, w.setPermissionMode,
		workflow.UpdateHandlerOptions{Validator: validatePermissionMode})
}

// validatePermissionMode refuses a request without a mode before it is recorded; the
// API checked the mode against the Agent program's declaration.
func validatePermissionMode(req SetPermissionMode) error {
	if req.PermissionMode == "" {
		return errors.New("permission_mode is required")
	}
	return nil
}

// setPermissionMode is the update handler. A live runtime's request waits for the run
// loop; otherwise, or once the run is handing over to its continuation, the mode is
// stored here (and applied again to a live runtime, see storeMode).
func (w *sessionWorkflow) setPermissionMode(ctx workflow.Context, req SetPermissionMode) (PermissionModeSet, error) {
	if w.s.Phase != PhaseActive || w.continuing {
		return PermissionModeSet{}, w.storeMode(ctx, req.PermissionMode)
	}
	c := &modeChange{mode: req.PermissionMode}
	w.modeChanges = append(w.modeChanges, c)
	if err := workflow.Await(ctx, func() bool { return c.done }); err != nil {
		return PermissionModeSet{}, err
	}
	return c.result, c.err
}

// storeMode stores a mode for the next runtime. A runtime being brought up meanwhile
// may have read the previous mode, and a live one holds it: either is given the
// stored mode again once live.
func (w *sessionWorkflow) storeMode(ctx workflow.Context, mode string) error {
	err := workflow.ExecuteActivity(summarized(withShared(ctx), "Store the permission mode"), act.StorePermissionMode,
		activities.PermissionModeRequest{SessionID: w.s.SessionID, PermissionMode: mode}).Get(ctx, nil)
	if err != nil {
		return err
	}
	if w.s.Phase == PhaseActive {
		w.s.Work.PermissionMode = true
	} else {
		w.s.Work.ReapplyPermissionMode = true
	}
	return nil
}

// storeQueuedModes answers the requests queued for a runtime that is no longer live:
// their modes are stored for the next one, in the order asked.
func (w *sessionWorkflow) storeQueuedModes(ctx workflow.Context) {
	for len(w.modeChanges) > 0 {
		c := w.modeChanges[0]
		w.modeChanges = w.modeChanges[1:]
		c.finish(PermissionModeSet{}, w.storeMode(ctx, c.mode))
	}
}

// applyModeChanges hands the queued requests to the live runtime, storing each mode
// the program accepts. It reports false when the host is gone: the requests left are
// then stored for the next runtime by the run loop.
func (w *sessionWorkflow) applyModeChanges(ctx workflow.Context, hctx workflow.Context) bool {
	ref := w.runtimeRef()
	for len(w.modeChanges) > 0 {
		c := w.modeChanges[0]
		err := workflow.ExecuteActivity(summarized(hctx, "Apply a permission mode to the running program"), act.ApplyPermissionMode, activities.PermissionModeRequest{
			SessionID: ref.SessionID, RuntimeGeneration: ref.RuntimeGeneration, PermissionMode: c.mode,
		}).Get(ctx, nil)
		switch errorType(err) {
		case "":
			c.finish(w.storeApplied(ctx, c.mode))
		case ErrPermissionModeRefused:
			c.finish(PermissionModeSet{}, refusal(err))
		default:
			if w.hostGone(ctx, err) {
				return false
			}
			// hostGone logged it; the program may or may not hold the mode, so the
			// stored one is applied again and the caller told.
			w.s.Work.PermissionMode = true
			c.finish(PermissionModeSet{}, err)
		}
		w.modeChanges = w.modeChanges[1:]
	}
	return true
}

// storeApplied stores a mode the live program accepted. Should the store fail, the
// program holds a mode the Session does not: the stored one is applied again.
func (w *sessionWorkflow) storeApplied(ctx workflow.Context, mode string) (PermissionModeSet, error) {
	err := workflow.ExecuteActivity(summarized(withShared(ctx), "Store the permission mode"), act.StorePermissionMode,
		activities.PermissionModeRequest{SessionID: w.s.SessionID, PermissionMode: mode}).Get(ctx, nil)
	if err != nil {
		w.s.Work.PermissionMode = true
		return PermissionModeSet{}, err
	}
	return PermissionModeSet{Applied: true}, nil
}

// refusal is the update's answer to a mode the program refused: an application error
// of type ErrPermissionModeRefused carrying only the program's message.
func refusal(err error) error {
	var app *temporal.ApplicationError
	msg := err.Error()
	if errors.As(err, &app) {
		msg = app.Message()
	}
	return temporal.NewApplicationErrorWithOptions(msg, ErrPermissionModeRefused,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}
