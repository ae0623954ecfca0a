package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// step spaces the test's signals. While a Relay runs the test environment fires
// timers on the wall clock, so steps are short real durations.
const step = 400 * time.Millisecond

func TestCreatingToActiveHandsOverInputSentWhileCreating(t *testing.T) {
	h := newHarness(t)
	// The input arrives before the runtime is up: it is kept and delivered once ready.
	h.at(0, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-1"}))
	h.at(step, func() {
		s := h.state()
		require.Equal(t, PhaseActive, s.Phase)
		require.Equal(t, testHostQueue, s.Placement.HostTaskQueue)
		require.False(t, s.Work.Deliver)
	})
	h.at(2*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-2"}))
	h.at(3*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-1"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "LoadSession", "PrepareRuntime:fresh", "ActivateRuntime:box-1:1:", "Deliver",
		"Deliver", "Disconnect", "Release:box-1", "ReconcileLostRuntime", "EndConversation:delete=true")
	require.Equal(t, 2, count(calls, "Deliver"), "a repeated signal re-reads and delivers; nothing else delivers")
}

func TestHandOverInterruptAnswerAndPermissionMode(t *testing.T) {
	h := newHarness(t)
	h.at(step, h.signal(SignalInterrupt, Interrupt{CancelQueued: true, RequestID: "r-1"}))
	h.at(2*step, h.signal(SignalInteractionAnswered, InteractionAnswered{InteractionID: "int-1"}))
	h.at(3*step, h.signal(SignalPermissionModeChanged, PermissionModeChanged{PermissionMode: "plan"}))
	h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleArchive}))
	h.run(SessionStart{SessionID: "s-2"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "Relay:1", "Interrupt:true", "Answer:int-1", "SetPermissionMode", "EndConversation:delete=false")
	require.Equal(t, 0, count(calls, "PrepareRuntime:reconnect"), "hand-over keeps the Relay and the runtime")
}

func TestAnswerThatIsNotOpenIsDropped(t *testing.T) {
	h := newHarness(t)
	h.answer = func(context.Context, activities.AnswerRequest) error {
		return nonRetryable(activities.ErrTypeInteractionNotOpen)
	}
	h.at(step, h.signal(SignalInteractionAnswered, InteractionAnswered{InteractionID: "int-9"}))
	h.at(2*step, func() { require.Empty(t, h.state().Work.Answers) })
	h.at(3*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-3"})
	require.NoError(t, h.env.GetWorkflowError())
}

func TestLostConnectionReconnectsToTheSameBox(t *testing.T) {
	h := newHarness(t)
	h.at(step, func() {
		h.relayEnds <- relayEnd{res: activities.RelayResult{End: activities.RelayConnectionLost, ThroughSeq: 7}}
	})
	h.at(5*step, func() {
		s := h.state()
		require.Equal(t, PhaseActive, s.Phase)
		require.Equal(t, int64(1), s.Placement.RuntimeGeneration, "a reconnect keeps the runtime generation")
	})
	h.at(6*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-4"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "Relay:1", "PrepareRuntime:reconnect", "ActivateRuntime:box-1:1:reconnect", "Deliver")
	require.Equal(t, 2, count(calls, "Relay:1"), "the new connection gets a new Relay")
	require.Equal(t, 0, count(calls, "ReconcileLostRuntime:"), "a lost connection is not a lost box")
}

func TestLostBoxIsReconciledAndReplacedInRestoreMode(t *testing.T) {
	h := newHarness(t)
	reconnects := 0
	h.prepare = func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		h.record("PrepareRuntime:" + string(req.Mode))
		if req.Mode == activities.PrepareReconnect {
			reconnects++
			return activities.PrepareResult{}, nonRetryable(activities.ErrTypeRuntimeLost)
		}
		h.gen++
		attach := ""
		if h.gen > 1 {
			attach = "restore"
		}
		return activities.PrepareResult{Placement: activities.Placement{SandboxID: boxName(h.gen), HostTaskQueue: testHostQueue, RuntimeGeneration: h.gen}, AttachMode: attach}, nil
	}
	h.at(step, func() { h.relayEnds <- relayEnd{res: activities.RelayResult{End: activities.RelayConnectionLost}} })
	h.at(5*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-5"})
	require.NoError(t, h.env.GetWorkflowError())
	requireInOrder(t, h.recorded(), "Relay:1", "PrepareRuntime:reconnect", "ReconcileLostRuntime",
		"PrepareRuntime:fresh", "ActivateRuntime:box-2:2:restore", "Deliver")
	require.Equal(t, 1, count(h.recorded(), "Relay:2"))
	require.Equal(t, 1, reconnects)
}

// TestIdleReleaseEndsTheRun: a box idle for the idle period is checked and released;
// with nothing asked of it, the released Session's run ends, and its workflow leaves
// the worker's cache.
func TestIdleReleaseEndsTheRun(t *testing.T) {
	h := newHarness(t)
	h.facts.IdleReleaseSeconds = 1
	h.run(SessionStart{SessionID: "s-6"})
	require.NoError(t, h.env.GetWorkflowError())
	s := h.state()
	require.Equal(t, PhaseReleased, s.Phase)
	require.Empty(t, s.Placement.SandboxID)
	calls := h.recorded()
	// The check that decides runs with the Relay stopped: nothing reaches the program
	// then but through the workflow.
	requireInOrder(t, calls, "Relay:1", "CheckIdle:relay-running", "CheckIdle:relay-stopped", "Disconnect", "Release:box-1", "ReconcileLostRuntime")
	require.Equal(t, "ReconcileLostRuntime", calls[len(calls)-1], "nothing follows the release")
}

// TestABoxBusyOnceItsRelayStoppedIsKept: the idle period passed and the Session was
// READY, but by the time its Relay stopped an input the Relay took on notice was
// being answered. The box stays, and the Relay starts again on the same runtime.
func TestABoxBusyOnceItsRelayStoppedIsKept(t *testing.T) {
	h := newHarness(t)
	busyOnceItsRelayStopped(h)
	h.at(1500*time.Millisecond, func() {
		s := h.state()
		require.Equal(t, PhaseActive, s.Phase)
		require.Equal(t, "box-1", s.Placement.SandboxID)
		require.Equal(t, []string{"CheckIdle:relay-running", "CheckIdle:relay-stopped"}, checks(h.recorded()))
	})
	h.at(1500*time.Millisecond+step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-idle-busy"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "Relay:1", "CheckIdle:relay-running", "CheckIdle:relay-stopped", "Relay:1", "Disconnect", "Release:box-1", "EndConversation:delete=true")
	require.Equal(t, 1, count(calls, "Release:"), "only the delete releases the box")
	require.Equal(t, 0, count(calls, "PrepareRuntime:reconnect"), "the runtime stayed connected")
}

// TestEachRelayIsStoppedOnItsHostByName: the idle check's stop and the delete's each
// name the Relay they end, so its worker ends it at once and a later Relay of the
// same runtime is not taken for it.
func TestEachRelayIsStoppedOnItsHostByName(t *testing.T) {
	h := newHarness(t)
	busyOnceItsRelayStopped(h)
	h.at(1500*time.Millisecond+step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-relay-stops"})
	require.NoError(t, h.env.GetWorkflowError())
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.relayIDs, 2, "the idle check's stop, then the delete's")
	require.NotEqual(t, h.relayIDs[0], h.relayIDs[1])
	ref := activities.RuntimeRef{SessionID: "s-relay-stops", RuntimeGeneration: 1}
	require.Equal(t, []activities.StopRelayRequest{{RuntimeRef: ref, RelayID: h.relayIDs[0]}, {RuntimeRef: ref, RelayID: h.relayIDs[1]}}, h.relayStops)
}

// busyOnceItsRelayStopped has the Session idle after a second, found idle by the
// first check and busy by the second, made with its Relay stopped.
func busyOnceItsRelayStopped(h *harness) {
	h.facts.IdleReleaseSeconds = 1
	checked := 0
	h.idle = func() bool {
		checked++
		return checked == 1
	}
}

// checks are the CheckIdle calls among calls.
func checks(calls []string) []string {
	var out []string
	for _, c := range calls {
		if strings.HasPrefix(c, "CheckIdle") {
			out = append(out, c)
		}
	}
	return out
}

// TestAReleasedSessionsNextInputStartsANewBox: the next input starts a new run
// (SignalWithStart), which loads the Session, finds it released and brings up a new
// box that restores the conversation.
func TestAReleasedSessionsNextInputStartsANewBox(t *testing.T) {
	h := releasedHarness(t)
	h.at(0, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-3"}))
	h.at(step, func() { require.Equal(t, PhaseActive, h.state().Phase) })
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-6"})
	require.NoError(t, h.env.GetWorkflowError())
	requireInOrder(t, h.recorded(), "LoadSession", "PrepareRuntime:fresh", "ActivateRuntime:box-2:2:restore", "Deliver")
	require.Equal(t, 1, count(h.recorded(), "Relay:2"))
}

// TestAnInputInTheReleasesLastTaskKeepsTheRun: an input signalled as the release's
// last activity completes reaches the workflow in the same task. The signal
// coroutine's selector holds it until that coroutine runs, after the run loop: the
// loop lets it run before deciding, so the input brings a box up instead of ending
// the run with it unread.
func TestAnInputInTheReleasesLastTaskKeepsTheRun(t *testing.T) {
	h := newHarness(t)
	signalled := false
	h.reconcile = func(context.Context, activities.ReconcileRequest) (activities.ReconcileResult, error) {
		if !signalled {
			// Posted before the activity's result: both are in the next task.
			signalled = true
			h.env.SignalWorkflowSkippingWorkflowTask(SignalInputAccepted, InputAccepted{InputID: "in-late"})
		}
		return activities.ReconcileResult{}, nil
	}
	h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleRelease}))
	h.at(3*step, func() { require.Equal(t, PhaseActive, h.state().Phase, "the input brought a box up") })
	h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-release-race"})
	require.NoError(t, h.env.GetWorkflowError())
	requireInOrder(t, h.recorded(), "Release:box-1", "ReconcileLostRuntime", "PrepareRuntime:fresh", "ActivateRuntime:box-2:2:restore", "Deliver",
		"EndConversation:delete=true")
}

// TestABusySessionKeepsOneIdleTimer sends inputs one after another: the loop waits
// after each, and each wait keeps the timer already armed instead of starting one
// that would fire, a workflow task of its own, an idle period later.
func TestABusySessionKeepsOneIdleTimer(t *testing.T) {
	h := newHarness(t)
	h.facts.IdleReleaseSeconds = 3600
	var timers []time.Duration
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	const inputs = 8
	for i := range inputs {
		h.at(time.Duration(i+1)*step, h.signal(SignalInputAccepted, InputAccepted{InputID: fmt.Sprintf("in-%d", i)}))
	}
	h.at((inputs+1)*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-idle-timer"})
	require.NoError(t, h.env.GetWorkflowError())
	require.GreaterOrEqual(t, count(h.recorded(), "Deliver"), inputs, "the loop woke for each input")
	require.Equal(t, []time.Duration{time.Hour}, timers, "one idle timer for every wait")
	require.Equal(t, 0, count(h.recorded(), "CheckIdle"))
}

// TestAnIdleTimerArmedBeforeTheLastWakeIsArmedAgainForTheRest: the timer armed when
// the box came up fires before the Session has been quiet for the whole period since
// its last input; it is armed again for the rest, and only then is the box checked
// and released.
func TestAnIdleTimerArmedBeforeTheLastWakeIsArmedAgainForTheRest(t *testing.T) {
	h := newHarness(t)
	h.facts.IdleReleaseSeconds = 2
	var timers []time.Duration
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	h.at(1500*time.Millisecond, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-1"}))
	h.at(2500*time.Millisecond, func() {
		require.Equal(t, 0, count(h.recorded(), "CheckIdle"), "quiet for 1 s of 2")
		require.Equal(t, PhaseActive, h.state().Phase)
	})
	h.run(SessionStart{SessionID: "s-idle-rearm"})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, PhaseReleased, h.state().Phase)
	require.Equal(t, []string{"CheckIdle:relay-running", "CheckIdle:relay-stopped"}, checks(h.recorded()), "one idle period, checked twice")
	require.Len(t, timers, 2)
	require.Equal(t, 2*time.Second, timers[0])
	require.Greater(t, timers[1], time.Second, "the rest of the period since the input")
	require.Less(t, timers[1], 2*time.Second)
}

// TestInputsTakenOnNoticeAndFoundHeldAtAReleaseStartANewBox: inputs accepted while the
// Relay took them on notice come without a signal; the release that finds them held
// brings a runtime up for them as a signal would. When the release fails, the
// reconciliation after it is what clears the record of a Relay taking inputs on
// notice, and what finds them.
func TestInputsTakenOnNoticeAndFoundHeldAtAReleaseStartANewBox(t *testing.T) {
	for name, firstRelease := range map[string]func(h *harness) (activities.ReleaseResult, error){
		"by the release": func(*harness) (activities.ReleaseResult, error) {
			return activities.ReleaseResult{HeldOnNotice: 1}, nil
		},
		"by the reconciliation after a failed release": func(h *harness) (activities.ReleaseResult, error) {
			h.reconciled = activities.ReconcileResult{HeldOnNotice: 1}
			return activities.ReleaseResult{}, nonRetryable("BackendUnavailable")
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			releases := 0
			h.release = func(context.Context, activities.ReleaseRequest) (activities.ReleaseResult, error) {
				releases++
				if releases == 1 {
					return firstRelease(h)
				}
				h.reconciled = activities.ReconcileResult{}
				return activities.ReleaseResult{HeldOnNotice: 2}, nil
			}
			h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleRelease}))
			h.at(3*step, func() {
				s := h.state()
				require.Equal(t, PhaseActive, s.Phase, "the held input brought a runtime up")
				require.Equal(t, "box-2", s.Placement.SandboxID)
			})
			h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleArchive}))
			h.run(SessionStart{SessionID: "s-held-on-notice"})
			require.NoError(t, h.env.GetWorkflowError())
			calls := h.recorded()
			requireInOrder(t, calls, "Relay:1", "Release:box-1", "ReconcileLostRuntime", "PrepareRuntime:fresh",
				"ActivateRuntime:box-2:2:restore", "Deliver", "Release:box-2", "EndConversation:delete=false")
			require.Equal(t, 2, count(calls, "PrepareRuntime:"), "an archive's release brings nothing up")
		})
	}
}

func TestReleaseSignalReleasesTheBoxAndEndsTheRun(t *testing.T) {
	h := newHarness(t)
	h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleRelease}))
	h.run(SessionStart{SessionID: "s-7"})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, PhaseReleased, h.state().Phase)
	calls := h.recorded()
	requireInOrder(t, calls, "Relay:1", "Disconnect", "Release:box-1", "ReconcileLostRuntime")
	require.Equal(t, "ReconcileLostRuntime", calls[len(calls)-1])
}

// TestWorkForAGoneRuntimeIsDropped: an interrupt, an answer or a child run's stop sent
// to a released Session, or an input or an interrupt sent to a terminated one, starts a
// run that finds no runtime to take it (the released box took its responses,
// interactions and child runs with it; nothing but the recover signal recovers a
// terminated runtime): the work is dropped, no box is started, and the run ends.
func TestWorkForAGoneRuntimeIsDropped(t *testing.T) {
	type signal struct {
		name    string
		payload any
		// left is the work the run ends with: an input stays held for the runtime a
		// recovery brings up, which hands over every held input once it is active.
		left Work
	}
	for _, gone := range []struct {
		phase   Phase
		harness func(*testing.T) *harness
		signals map[string]signal
	}{
		{PhaseReleased, releasedHarness, map[string]signal{
			"interrupt":      {SignalInterrupt, Interrupt{RequestID: "r-9"}, Work{}},
			"answer":         {SignalInteractionAnswered, InteractionAnswered{InteractionID: "int-9"}, Work{}},
			"child-run stop": {SignalStopChildRun, StopChildRun{ChildRunID: "cr-5"}, Work{}},
		}},
		{PhaseTerminated, terminatedHarness, map[string]signal{
			"input":     {SignalInputAccepted, InputAccepted{InputID: "in-5"}, Work{Deliver: true}},
			"interrupt": {SignalInterrupt, Interrupt{RequestID: "r-5"}, Work{}},
		}},
	} {
		for name, sig := range gone.signals {
			t.Run(string(gone.phase)+" "+name, func(t *testing.T) {
				h := gone.harness(t)
				h.at(0, h.signal(sig.name, sig.payload))
				h.run(SessionStart{SessionID: "s-gone-work"})
				require.NoError(t, h.env.GetWorkflowError())
				s := h.state()
				require.Equal(t, gone.phase, s.Phase)
				require.Equal(t, sig.left, s.Work)
				require.Equal(t, []string{"LoadSession"}, h.recorded())
			})
		}
	}
}

// TestArchivingAReleasedSessionStartsNoBox: the archive starts a run that ends the
// conversation with no box to release.
func TestArchivingAReleasedSessionStartsNoBox(t *testing.T) {
	h := releasedHarness(t)
	h.at(0, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleArchive}))
	h.run(SessionStart{SessionID: "s-released-archive"})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, PhaseArchived, h.state().Phase)
	require.Equal(t, []string{"LoadSession", "EndConversation:delete=false"}, h.recorded())
}

// TestRepeatedPrepareFailureTerminatesAndEndsTheRun: too many failed bring-ups take
// the runtime offline; once PostgreSQL records the termination nothing is asked of
// the run, and it ends.
func TestRepeatedPrepareFailureTerminatesAndEndsTheRun(t *testing.T) {
	h := newHarness(t)
	h.prepare = func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		h.record("PrepareRuntime:" + string(req.Mode))
		return activities.PrepareResult{}, nonRetryable("BoxUnavailable")
	}
	h.run(SessionStart{SessionID: "s-8"})
	require.NoError(t, h.env.GetWorkflowError())
	s := h.state()
	require.Equal(t, PhaseTerminated, s.Phase)
	require.True(t, s.TerminationRecorded)
	calls := h.recorded()
	require.Equal(t, maxFailures, count(calls, "PrepareRuntime:"))
	require.Equal(t, "MarkTerminated", calls[len(calls)-1])
}

// TestATerminationNotRecordedKeepsTheRunUntilRecover: when MarkTerminated fails,
// PostgreSQL may not say TERMINATED, and a next run would bring a runtime up again:
// the run waits, terminated, for the recover signal (or its next try at recording the
// termination, a minute away here); an input does not recover it.
func TestATerminationNotRecordedKeepsTheRunUntilRecover(t *testing.T) {
	h := newHarness(t)
	failing := true
	h.prepare = func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		h.record("PrepareRuntime:" + string(req.Mode))
		if failing {
			return activities.PrepareResult{}, nonRetryable("BoxUnavailable")
		}
		return activities.PrepareResult{Placement: activities.Placement{SandboxID: "box-9", HostTaskQueue: testHostQueue, RuntimeGeneration: 9}}, nil
	}
	h.markTerminated = func() error { return nonRetryable("DatabaseDown") }
	h.at(step, func() {
		s := h.state()
		require.Equal(t, PhaseTerminated, s.Phase)
		require.False(t, s.TerminationRecorded)
		failing = false
	})
	h.at(2*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-4"}))
	h.at(3*step, func() { require.Equal(t, PhaseTerminated, h.state().Phase, "an input does not recover") })
	h.at(4*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleRecover}))
	h.at(5*step, func() { require.Equal(t, PhaseActive, h.state().Phase) })
	h.at(6*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-8-unrecorded"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	require.Equal(t, maxFailures+1, count(calls, "PrepareRuntime:"))
	requireInOrder(t, calls, "MarkTerminated", "ActivateRuntime:box-9:9:", "Deliver")
	require.Equal(t, 1, count(calls, "Relay:9"))
}

// TestATerminationNotRecordedIsTriedAgainUntilTheRunCanEnd: until PostgreSQL says
// TERMINATED the API cannot recover the Session, so the run tries MarkTerminated again
// every terminationRetry; once it goes through, the run ends.
func TestATerminationNotRecordedIsTriedAgainUntilTheRunCanEnd(t *testing.T) {
	h := newHarness(t)
	h.prepare = func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		h.record("PrepareRuntime:" + string(req.Mode))
		return activities.PrepareResult{}, nonRetryable("BoxUnavailable")
	}
	failures := 2
	h.markTerminated = func() error {
		if failures > 0 {
			failures--
			return nonRetryable("DatabaseDown")
		}
		return nil
	}
	start := h.env.Now()
	h.run(SessionStart{SessionID: "s-8-retried"})
	require.NoError(t, h.env.GetWorkflowError())
	s := h.state()
	require.Equal(t, PhaseTerminated, s.Phase)
	require.True(t, s.TerminationRecorded)
	require.Equal(t, 3, count(h.recorded(), "MarkTerminated"))
	require.GreaterOrEqual(t, h.env.Now().Sub(start), 2*terminationRetry)
}

// TestARecoveredSessionsRunBringsUpARuntime: the recovery moved the Session to
// CREATING and its signal started a new run (the terminated one had ended), which
// brings up a box restoring the conversation. A recovery whose signal was lost
// (Temporal down) is taken up by the next message's signal, as a new Session's lost
// start is: its run finds the Session CREATING with no runtime all the same.
func TestARecoveredSessionsRunBringsUpARuntime(t *testing.T) {
	for name, tc := range map[string]struct {
		signal  string
		payload any
		want    []string
	}{
		"recover signal": {SignalLifecycle, Lifecycle{Action: LifecycleRecover},
			[]string{"LoadSession", "PrepareRuntime:fresh", "ActivateRuntime:box-2:2:restore", "Relay:2"}},
		"recover signal lost, then an input": {SignalInputAccepted, InputAccepted{InputID: "in-after-recovery"},
			[]string{"LoadSession", "PrepareRuntime:fresh", "ActivateRuntime:box-2:2:restore", "Deliver"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := recoveredHarness(t)
			h.at(0, h.signal(tc.signal, tc.payload))
			h.at(step, func() { require.Equal(t, PhaseActive, h.state().Phase) })
			h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
			h.run(SessionStart{SessionID: "s-recovered"})
			require.NoError(t, h.env.GetWorkflowError())
			calls := h.recorded()
			requireInOrder(t, calls, tc.want...)
			require.Equal(t, 1, count(calls, "PrepareRuntime:"))
		})
	}
}

// TestAnActivationWhoseWorkerDiedReconnectsWithoutCountingAFailure: the worker
// activating the runtime died and another worker failed the activation for it. The
// box may live on, so the workflow reconnects to it through a live worker, and a
// worker's death is not the runtime's failure: more of them than maxFailures in a
// row do not terminate the runtime.
func TestAnActivationWhoseWorkerDiedReconnectsWithoutCountingAFailure(t *testing.T) {
	h := newHarness(t)
	lost := maxFailures + 1
	h.activate = func(context.Context, activities.ActivateRequest) (activities.ActivateResult, error) {
		if lost > 0 {
			lost--
			return activities.ActivateResult{}, nonRetryable(activities.ErrTypeWorkerLost)
		}
		return activities.ActivateResult{HostTaskQueue: testHostQueue}, nil
	}
	h.at(step, func() { require.Equal(t, PhaseActive, h.state().Phase) })
	h.at(2*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-worker-lost"})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	require.Zero(t, count(calls, "MarkTerminated"))
	require.Equal(t, 1, count(calls, "PrepareRuntime:fresh"), "one box")
	require.Equal(t, maxFailures+1, count(calls, "PrepareRuntime:reconnect"))
	// The Relay and the hand-over start together, in either order.
	requireInOrder(t, calls, "ActivateRuntime:box-1:1:", "PrepareRuntime:reconnect", "ActivateRuntime:box-1:1:reconnect", "Deliver")
	requireInOrder(t, calls, "ActivateRuntime:box-1:1:reconnect", "Relay:1")
	require.Equal(t, 1, count(calls, "Relay:"), "one Relay, after the activation that went through")
}

// TestPreparationRefusalFailsTheHeldInputsAndTerminatesAtOnce: a configuration
// failure is not tried again: the held inputs fail with its reason and the runtime is
// terminated until recovered.
func TestPreparationRefusalFailsTheHeldInputsAndTerminatesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.prepare = func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		h.record("PrepareRuntime:" + string(req.Mode))
		return activities.PrepareResult{}, nonRetryable(activities.ErrTypeConfiguration)
	}
	h.run(SessionStart{SessionID: "s-refused"})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, PhaseTerminated, h.state().Phase)
	calls := h.recorded()
	require.Equal(t, 1, count(calls, "PrepareRuntime:"), "a refusal is not tried again")
	requireInOrder(t, calls, "RefuseHeldInputs:test: "+activities.ErrTypeConfiguration, "MarkTerminated")
}

func TestStartForDeletedOrArchivedSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		facts activities.SessionFacts
		want  string
	}{
		{"deleted", activities.SessionFacts{Lifecycle: "deleted"}, "EndConversation:delete=true"},
		{"archived", activities.SessionFacts{Lifecycle: "active", Archived: true}, "EndConversation:delete=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.facts = tc.facts
			h.run(SessionStart{SessionID: "s-9-" + tc.name})
			require.NoError(t, h.env.GetWorkflowError())
			calls := h.recorded()
			requireInOrder(t, calls, "LoadSession", tc.want)
			require.Equal(t, 0, count(calls, "PrepareRuntime:"))
		})
	}
}

func TestRestartedWorkflowReconnectsToPlacedRuntime(t *testing.T) {
	for _, lifecycle := range []string{"active", "creating"} {
		t.Run(lifecycle, func(t *testing.T) { testRestartedWorkflowReconnects(t, lifecycle) })
	}
}

func testRestartedWorkflowReconnects(t *testing.T, lifecycle string) {
	h := newHarness(t)
	h.gen = 4
	h.facts = activities.SessionFacts{Lifecycle: lifecycle, Placement: activities.Placement{SandboxID: "box-4", RuntimeGeneration: 4}}
	h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-10"})
	require.NoError(t, h.env.GetWorkflowError())
	requireInOrder(t, h.recorded(), "PrepareRuntime:reconnect", "ActivateRuntime:box-4:4:reconnect", "Deliver")
	require.Equal(t, 1, count(h.recorded(), "Relay:4"))
}

func TestContinueAsNewCarriesPendingSignals(t *testing.T) {
	h := newHarness(t)
	h.at(step, func() {
		// Signals that arrive in the same workflow task as the suggestion are pending
		// when the workflow decides to continue: they must be carried, not lost.
		h.env.SetContinueAsNewSuggested(true)
		h.env.SignalWorkflow(SignalInteractionAnswered, InteractionAnswered{InteractionID: "int-late"})
		h.env.SignalWorkflow(SignalInputAccepted, InputAccepted{InputID: "in-late"})
		h.env.SignalWorkflow(SignalInterrupt, Interrupt{CancelQueued: true})
		h.env.SignalWorkflow(SignalPermissionModeChanged, PermissionModeChanged{PermissionMode: "plan"})
		h.env.SignalWorkflow(SignalLifecycle, Lifecycle{Action: LifecycleRelease})
	})
	h.run(SessionStart{SessionID: "s-11"})
	start := decodeCarry(t, h.env.GetWorkflowError())
	c := start.Carry
	require.Equal(t, "s-11", start.SessionID)
	require.Equal(t, PhaseActive, c.Phase)
	require.Equal(t, testHostQueue, c.Placement.HostTaskQueue)
	require.Equal(t, []string{"int-late"}, c.Work.Answers)
	require.True(t, c.Work.Deliver)
	require.True(t, c.Work.PermissionMode)
	require.True(t, c.Work.Release)
	require.NotNil(t, c.Work.Interrupt)
	require.True(t, c.Work.Interrupt.CancelQueued)
	calls := h.recorded()
	require.Equal(t, 0, count(calls, "Answer:"), "the continuation hands the work over")
	require.Equal(t, 0, count(calls, "Release:"))
}

func TestDrainSignalsMovesBufferedSignalsIntoState(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (SessionState, error) {
		w := &sessionWorkflow{
			inputs:       workflow.GetSignalChannel(ctx, SignalInputAccepted),
			answers:      workflow.GetSignalChannel(ctx, SignalInteractionAnswered),
			interrupts:   workflow.GetSignalChannel(ctx, SignalInterrupt),
			permissions:  workflow.GetSignalChannel(ctx, SignalPermissionModeChanged),
			stops:        workflow.GetSignalChannel(ctx, SignalStopChildRun),
			lifecycles:   workflow.GetSignalChannel(ctx, SignalLifecycle),
			observations: workflow.GetSignalChannel(ctx, SignalSessionObserved),
		}
		// No listener runs here: only the drain can read the buffered signals.
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return SessionState{}, err
		}
		w.drainSignals(ctx)
		return w.s, nil
	}, workflow.RegisterOptions{Name: "drain"})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalInputAccepted, InputAccepted{InputID: "a"})
		env.SignalWorkflow(SignalInteractionAnswered, InteractionAnswered{InteractionID: "i-1"})
		env.SignalWorkflow(SignalInteractionAnswered, InteractionAnswered{InteractionID: "i-2"})
		env.SignalWorkflow(SignalInterrupt, Interrupt{CancelQueued: true})
		env.SignalWorkflow(SignalInterrupt, Interrupt{})
		env.SignalWorkflow(SignalPermissionModeChanged, PermissionModeChanged{})
		env.SignalWorkflow(SignalStopChildRun, StopChildRun{ChildRunID: "cr-1"})
		env.SignalWorkflow(SignalStopChildRun, StopChildRun{ChildRunID: "cr-1"})
		env.SignalWorkflow(SignalLifecycle, Lifecycle{Action: LifecycleArchive})
		env.SignalWorkflow(SignalSessionObserved, activities.SessionObservation{State: "PROCESSING", HeldInputs: 1})
		env.SignalWorkflow(SignalSessionObserved, activities.SessionObservation{State: "READY"})
	}, time.Second)
	env.ExecuteWorkflow("drain")
	require.NoError(t, env.GetWorkflowError())
	var s SessionState
	require.NoError(t, env.GetWorkflowResult(&s))
	require.True(t, s.Work.Deliver)
	require.Equal(t, []string{"i-1", "i-2"}, s.Work.Answers)
	require.True(t, s.Work.Interrupt.CancelQueued, "cancel_queued sticks once asked")
	require.True(t, s.Work.PermissionMode)
	require.Equal(t, []string{"cr-1"}, s.Work.StopChildRuns, "a repeated stop is recorded once")
	require.True(t, s.Work.Archive)
	require.Equal(t, activities.SessionObservation{State: "READY"}, s.Observed, "the newest observation is carried")
}

func TestContinuedRunResumesRelayAndHandsOverCarriedWork(t *testing.T) {
	h := newHarness(t)
	carry := SessionState{
		SessionID: "s-12", AgentID: "agent-1", EngineKind: "scripted", Phase: PhaseActive,
		Placement: activities.Placement{SandboxID: "box-3", HostTaskQueue: testHostQueue, RuntimeGeneration: 3},
		Work:      Work{Deliver: true, Answers: []string{"int-7"}},
	}
	h.at(step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-12", Carry: &carry})
	require.NoError(t, h.env.GetWorkflowError())
	calls := h.recorded()
	requireInOrder(t, calls, "Answer:int-7", "Deliver")
	require.Equal(t, 1, count(calls, "Relay:3"))
	require.Equal(t, 0, count(calls, "LoadSession"))
	require.Equal(t, 0, count(calls, "PrepareRuntime:"))
}

// TestHostTimeoutReconnects: a host activity that finds no live runtime, or whose
// worker died (failed by another worker's host watch), means the connection is gone:
// the workflow reconnects through a live worker and hands the work over again.
func TestHostTimeoutReconnects(t *testing.T) {
	for _, errType := range []string{activities.ErrTypeNoLiveRuntime, activities.ErrTypeWorkerLost} {
		t.Run(errType, func(t *testing.T) {
			h := newHarness(t)
			delivered := 0
			h.deliver = func(ctx context.Context, ref activities.RuntimeRef) (activities.DeliverResult, error) {
				h.record("Deliver")
				delivered++
				if delivered == 2 {
					return activities.DeliverResult{}, nonRetryable(errType)
				}
				return activities.DeliverResult{}, nil
			}
			h.at(step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-5"}))
			h.at(5*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
			h.run(SessionStart{SessionID: "s-13"})
			require.NoError(t, h.env.GetWorkflowError())
			requireInOrder(t, h.recorded(), "Deliver", "Deliver", "PrepareRuntime:reconnect", "ActivateRuntime:box-1:1:reconnect", "Deliver")
		})
	}
}

// TestInputsAreLeftToARelayThatDeliversOnNotice: once the running Relay observes that
// it hands new inputs over on PostgreSQL's notice, a new input runs no Deliver; a
// re-sent input signal does, and so does the next input after the Relay was
// replaced, until the new Relay says so too.
func TestInputsAreLeftToARelayThatDeliversOnNotice(t *testing.T) {
	h := newHarness(t)
	delivers := func(want int, why string) func() {
		return func() { require.Equal(t, want, count(h.recorded(), "Deliver"), why) }
	}
	h.at(0, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-1"}))
	h.at(step, h.signal(SignalSessionObserved, activities.SessionObservation{State: "READY", DeliversOnNotice: true}))
	h.at(2*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-2"}))
	h.at(3*step, delivers(1, "the bring-up delivers; in-2 is the Relay's"))
	h.at(3*step, func() { require.False(t, h.state().Work.Deliver, "nothing is left to deliver") })
	h.at(4*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-2", Resent: true}))
	h.at(5*step, delivers(2, "a re-sent signal runs the workflow's Deliver"))
	h.at(6*step, func() {
		h.relayEnds <- relayEnd{res: activities.RelayResult{End: activities.RelayConnectionLost}}
	})
	h.at(10*step, delivers(3, "the reconnect's bring-up delivers"))
	h.at(10*step, func() { require.False(t, h.state().Observed.DeliversOnNotice, "the new Relay has not said so") })
	h.at(11*step, h.signal(SignalInputAccepted, InputAccepted{InputID: "in-3"}))
	h.at(12*step, delivers(4, "until the new Relay says so, the workflow delivers"))
	h.at(13*step, h.signal(SignalLifecycle, Lifecycle{Action: LifecycleDelete}))
	h.run(SessionStart{SessionID: "s-notice"})
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, 2, count(h.recorded(), "Relay:1"), "the connection was replaced once")
}
