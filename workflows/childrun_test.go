package workflows

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
)

func TestStopChildRunIsHandedToTheLiveRuntimeOnce(t *testing.T) {
	h := newHarness(t)
	h.at(step, h.signal(SignalStopChildRun, StopChildRun{ChildRunID: "cr-1"}))
	h.at(2*step, func() { require.Empty(t, h.state().Work.StopChildRuns) })
	h.at(3*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-stop-1"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "ActivateRuntime:box-1:1:", "Relay:1", "StopChildRun:cr-1:1", "EndConversation:delete=true")
	require.Equal(t, 1, count(calls, "StopChildRun:"))
}

func TestStopChildRunSentWhileCreatingWaitsForTheRuntime(t *testing.T) {
	h := newHarness(t)
	// The signal is recorded before the runtime exists and handed over once it is up.
	h.at(0, h.signal(SignalStopChildRun, StopChildRun{ChildRunID: "cr-early"}))
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-stop-2"})
	require.NoError(t, h.env.GetWorkflowError())
	requireInOrder(t, h.recorded(), "PrepareRuntime:fresh", "ActivateRuntime:box-1:1:", "StopChildRun:cr-early:1")
}

func TestStopChildRunWaitsForTheNextConnection(t *testing.T) {
	h := newHarness(t)
	var attempts atomic.Int32
	h.stop = func(context.Context, activities.StopChildRunRequest) error {
		if attempts.Add(1) == 1 {
			// The worker holding the connection restarted: the request must survive.
			return nonRetryable(activities.ErrTypeNoLiveRuntime)
		}
		return nil
	}
	h.at(step, h.signal(SignalStopChildRun, StopChildRun{ChildRunID: "cr-2"}))
	h.at(4*step, func() {
		s := h.state()
		require.Equal(t, PhaseActive, s.Phase)
		require.Empty(t, s.Work.StopChildRuns, "the stop was handed to the new connection")
	})
	h.at(5*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-stop-3"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "StopChildRun:cr-2:1", "PrepareRuntime:reconnect", "ActivateRuntime:box-1:1:reconnect", "StopChildRun:cr-2:1")
	require.Equal(t, 2, count(calls, "StopChildRun:"))
}

func TestStopChildRunTheRuntimeRejectsIsNotRetried(t *testing.T) {
	h := newHarness(t)
	h.stop = func(context.Context, activities.StopChildRunRequest) error {
		return nonRetryable(activities.ErrTypeChildRunNotStoppable)
	}
	h.at(step, h.signal(SignalStopChildRun, StopChildRun{ChildRunID: "cr-3"}))
	h.at(2*step, h.signal(SignalStopChildRun, StopChildRun{ChildRunID: "cr-4"}))
	h.at(3*step, func() { require.Empty(t, h.state().Work.StopChildRuns) })
	h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-stop-4"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	require.Equal(t, 1, count(calls, "StopChildRun:cr-3"), "a rejected stop is dropped, not retried")
	require.Equal(t, 1, count(calls, "StopChildRun:cr-4"), "a rejected stop does not block the next one")
	require.Equal(t, 0, count(calls, "PrepareRuntime:reconnect"), "a rejected stop keeps the connection")
}
