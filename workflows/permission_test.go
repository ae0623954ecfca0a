package workflows

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/astrabox/astrabox/activities"
)

// modeOutcome is what one permission-mode update answered.
type modeOutcome struct {
	done     bool
	rejected error
	result   PermissionModeSet
	err      error
}

// setMode sends UpdateSetPermissionMode and records its outcome in out.
func (h *harness) setMode(id, mode string, out *modeOutcome) func() {
	return func() {
		h.env.UpdateWorkflow(UpdateSetPermissionMode, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { out.done, out.rejected = true, err },
			OnComplete: func(v any, err error) {
				out.done, out.err = true, err
				if res, ok := v.(PermissionModeSet); ok {
					out.result = res
				}
			},
		}, SetPermissionMode{PermissionMode: mode})
	}
}

func TestPermissionModeIsAppliedToTheLiveRuntimeThenStored(t *testing.T) {
	h := newHarness(t)
	var out modeOutcome
	h.at(step, h.setMode("u-1", "bypassPermissions", &out))
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-1"})
	require.NoError(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.NoError(t, out.err)
	require.Equal(t, PermissionModeSet{Applied: true}, out.result)
	requireInOrder(t, h.recorded(), "Relay:1", "ApplyPermissionMode:bypassPermissions:1", "StorePermissionMode:bypassPermissions")
}

// TestRefusedPermissionModeIsNeitherStoredNorTerminating answers a refusal to the
// caller in the program's words; nothing is stored, and the runtime stays live and
// keeps taking work.
func TestRefusedPermissionModeIsNeitherStoredNorTerminating(t *testing.T) {
	h := newHarness(t)
	const said = "Cannot set permission mode to bypassPermissions because the session was not launched with --dangerously-skip-permissions"
	h.applyMode = func(context.Context, activities.PermissionModeRequest) error {
		return temporal.NewNonRetryableApplicationError(said, activities.ErrTypePermissionModeRefused, errors.New("runtime refused set_permission_mode"))
	}
	var out modeOutcome
	h.at(step, h.setMode("u-2", "bypassPermissions", &out))
	h.at(2*step, func() {
		s := h.state()
		require.Equal(t, PhaseActive, s.Phase, "a refused mode keeps the runtime")
		require.False(t, s.Work.PermissionMode, "the stored mode is not applied again: it did not change")
	})
	h.at(3*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-after"}))
	h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-2"})
	require.NoError(t, h.env.GetWorkflowError())

	require.True(t, out.done)
	require.NoError(t, out.rejected, "the request was valid; the program refused it")
	var app *temporal.ApplicationError
	require.ErrorAs(t, out.err, &app)
	require.Equal(t, ErrPermissionModeRefused, app.Type())
	require.Equal(t, said, app.Message(), "the caller reads the program's own words")
	calls := h.recorded()
	require.Zero(t, count(calls, "StorePermissionMode"), "a refused mode is not stored")
	require.Zero(t, count(calls, "MarkTerminated"))
	require.Zero(t, count(calls, "PrepareRuntime:reconnect"), "a refusal is not a lost connection")
	requireInOrder(t, calls, "ApplyPermissionMode:bypassPermissions:1", "Deliver", "EndConversation:delete=true")
}

// TestPermissionModeWithoutALiveRuntimeIsStored: a mode set on a released or a
// terminated Session starts a run (UpdateWithStart) that stores it and starts no box;
// the run ends once it answered.
func TestPermissionModeWithoutALiveRuntimeIsStored(t *testing.T) {
	for phase, harness := range map[Phase]func(*testing.T) *harness{PhaseReleased: releasedHarness, PhaseTerminated: terminatedHarness} {
		t.Run(string(phase), func(t *testing.T) {
			h := harness(t)
			var out modeOutcome
			h.at(0, h.setMode("u-3", "plan", &out))
			h.run(SessionStart{SessionID: "s-mode-3"})
			require.NoError(t, h.env.GetWorkflowError())
			require.True(t, out.done)
			require.NoError(t, out.err)
			require.Equal(t, PermissionModeSet{Applied: false}, out.result)
			require.Equal(t, phase, h.state().Phase, "storing a mode starts no box")
			require.ElementsMatch(t, []string{"LoadSession", "StorePermissionMode:plan"}, h.recorded())
		})
	}
}

// TestPermissionModeStoredWhileReleasedIsTheNextRuntimes: an input that arrives as the
// mode's store completes (the same workflow task) keeps the run, and the runtime it
// brings up reads the stored mode when it activates; nothing applies it twice.
func TestPermissionModeStoredWhileReleasedIsTheNextRuntimes(t *testing.T) {
	h := releasedHarness(t)
	h.storeMode = func(context.Context, activities.PermissionModeRequest) error {
		// Posted before the activity's result: both are in the next task.
		h.env.SignalWorkflowSkippingWorkflowTask(SignalInputAccepted, InputAccepted{InputID: "in-next"})
		return nil
	}
	var out modeOutcome
	h.at(0, h.setMode("u-3", "plan", &out))
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-3"})
	require.NoError(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.NoError(t, out.err)
	require.Equal(t, PermissionModeSet{Applied: false}, out.result)
	calls := h.recorded()
	requireInOrder(t, calls, "StorePermissionMode:plan", "ActivateRuntime:box-2:2:restore", "Deliver")
	require.Zero(t, count(calls, "ApplyPermissionMode"))
	require.Zero(t, count(calls, "SetPermissionMode"))
}

// TestPermissionModeStoredDuringBringUpIsAppliedOnceLive covers the mode stored while
// a runtime activates: the activation may have read the previous mode, so the stored
// one is applied again once the runtime is live.
func TestPermissionModeStoredDuringBringUpIsAppliedOnceLive(t *testing.T) {
	h := newHarness(t)
	activating, storing := make(chan struct{}), make(chan struct{})
	h.activate = func(ctx context.Context, _ activities.ActivateRequest) (activities.ActivateResult, error) {
		close(activating)
		select {
		case <-storing:
		case <-ctx.Done():
			return activities.ActivateResult{}, ctx.Err()
		}
		return activities.ActivateResult{HostTaskQueue: testHostQueue}, nil
	}
	h.storeMode = func(ctx context.Context, _ activities.PermissionModeRequest) error {
		select {
		case <-activating:
		case <-ctx.Done():
			return ctx.Err()
		}
		close(storing)
		return nil
	}
	var out modeOutcome
	h.at(0, h.setMode("u-4", "acceptEdits", &out))
	h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-4"})
	require.NoError(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.NoError(t, out.err)
	require.False(t, out.result.Applied)
	// The activation waits for the store, so the mode was stored during the bring-up
	// whichever of the two activities started first.
	calls := h.recorded()
	requireInOrder(t, calls, "StorePermissionMode:acceptEdits", "SetPermissionMode")
	requireInOrder(t, calls, "ActivateRuntime:box-1:1:", "SetPermissionMode")
}

// TestPermissionModeQueuedForALostHostIsStored stores a mode whose runtime connection
// was lost while the request waited, and answers it.
func TestPermissionModeQueuedForALostHostIsStored(t *testing.T) {
	h := newHarness(t)
	lost := true
	h.applyMode = func(context.Context, activities.PermissionModeRequest) error {
		if lost {
			lost = false
			return nonRetryable(activities.ErrTypeNoLiveRuntime)
		}
		return nil
	}
	var out modeOutcome
	h.at(step, h.setMode("u-5", "dontAsk", &out))
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-5"})
	require.NoError(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.NoError(t, out.err)
	require.False(t, out.result.Applied, "stored for the runtime that reconnects")
	requireInOrder(t, h.recorded(), "ApplyPermissionMode:dontAsk:1", "StorePermissionMode:dontAsk", "PrepareRuntime:reconnect", "ActivateRuntime:box-1:1:reconnect")
}

func TestPermissionModeUpdateWithoutAModeIsRejected(t *testing.T) {
	h := newHarness(t)
	var out modeOutcome
	h.at(step, h.setMode("u-6", "", &out))
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-mode-6"})
	require.NoError(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.Error(t, out.rejected)
	calls := h.recorded()
	require.Zero(t, count(calls, "ApplyPermissionMode"))
	require.Zero(t, count(calls, "StorePermissionMode"))
}

// TestPermissionModeUpdateIsAnsweredBeforeContinueAsNew: an update that arrives once
// the run decided to continue as new cannot wait for the run loop (which waits for
// every handler): its mode is stored, answered, and the continuation applies it to the
// live runtime.
func TestPermissionModeUpdateIsAnsweredBeforeContinueAsNew(t *testing.T) {
	h := newHarness(t)
	var out modeOutcome
	h.at(step, func() {
		h.env.SetContinueAsNewSuggested(true)
		h.setMode("u-7", "plan", &out)()
	})
	h.run(SessionStart{SessionID: "s-mode-7"})
	start := decodeCarry(t, h.env.GetWorkflowError())
	require.True(t, out.done)
	require.NoError(t, out.err)
	require.False(t, out.result.Applied)
	require.True(t, start.Carry.Work.PermissionMode, "the continuation applies the stored mode")
	calls := h.recorded()
	require.Equal(t, 1, count(calls, "StorePermissionMode:plan"))
	require.Zero(t, count(calls, "ApplyPermissionMode"))
}
