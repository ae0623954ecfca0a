package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// QuerySessionState is the query that returns the workflow's SessionState.
const QuerySessionState = "session-state"

// act is the typed receiver of activity method references; activities run on workers,
// never through this value.
var act *activities.Activities

// sessionWorkflow is one Session's entity workflow: one state struct and a run loop.
type sessionWorkflow struct {
	s     SessionState
	relay *relayHandle

	inputs       workflow.ReceiveChannel
	answers      workflow.ReceiveChannel
	interrupts   workflow.ReceiveChannel
	permissions  workflow.ReceiveChannel
	stops        workflow.ReceiveChannel
	lifecycles   workflow.ReceiveChannel
	observations workflow.ReceiveChannel
	startedFresh bool
	// modeChanges are permission-mode updates waiting for the live runtime.
	modeChanges []*modeChange
	// continuing is set once the run hands over to its continuation: no update may
	// wait for the run loop then, since the loop waits for every handler.
	continuing bool
	// draining is set while the signals still buffered move into the carried state.
	draining bool
	// idleTimer is the one timer armed for the idle period; nil when none is.
	idleTimer workflow.Future
	// idleTimerVersion is oneIdleTimerChange's version once the run has asked.
	idleTimerVersion *workflow.Version
	// relaysStarted counts the Relays this run started, which names each
	// (relayStoppedOnHostChange).
	relaysStarted int
}

// relayHandle follows the running Relay activity.
type relayHandle struct {
	cancel workflow.CancelFunc
	// future is the Relay activity's, which the run loop reads (relayReadByLoopChange);
	// nil in a run before that change, where a coroutine sets done.
	future workflow.Future
	done   bool
	result activities.RelayResult
	err    error
	// stop names the Relay for StopRelay on its host queue; empty in a run before
	// relayStoppedOnHostChange, which stops it through Temporal's cancellation alone.
	stop activities.StopRelayRequest
	// queue is the host queue the Relay runs on.
	queue string
}

// SessionWorkflow runs one Session: it brings its runtime up, keeps a Relay reading
// it, hands over inputs, answers, interrupts and permission modes, recovers from lost
// connections and lost boxes, releases an idle box, and ends on archive or delete, or
// once its box is released or its termination recorded and nothing is asked of it
// (the next signal or update starts a new run).
func SessionWorkflow(ctx workflow.Context, start SessionStart) error {
	w, err := newSessionWorkflow(ctx, start)
	if err != nil {
		return err
	}
	return w.run(ctx)
}

// newSessionWorkflow builds the workflow and registers its handlers: signal listeners
// that only record work in the state, the state query, and the permission-mode update.
func newSessionWorkflow(ctx workflow.Context, start SessionStart) (*sessionWorkflow, error) {
	w := &sessionWorkflow{
		inputs:       workflow.GetSignalChannel(ctx, SignalInputAccepted),
		answers:      workflow.GetSignalChannel(ctx, SignalInteractionAnswered),
		interrupts:   workflow.GetSignalChannel(ctx, SignalInterrupt),
		permissions:  workflow.GetSignalChannel(ctx, SignalPermissionModeChanged),
		stops:        workflow.GetSignalChannel(ctx, SignalStopChildRun),
		lifecycles:   workflow.GetSignalChannel(ctx, SignalLifecycle),
		observations: workflow.GetSignalChannel(ctx, SignalSessionObserved),
	}
	if start.Carry != nil {
		w.s = *start.Carry
	} else {
		w.s = SessionState{SessionID: start.SessionID}
		w.startedFresh = true
	}
	if err := workflow.SetQueryHandler(ctx, QuerySessionState, func() (SessionState, error) { return w.s, nil }); err != nil {
		return nil, err
	}
	if err := w.registerPermissionMode(ctx); err != nil {
		return nil, err
	}
	signals := workflow.NewSelector(ctx)
	for _, src := range w.signalSources(ctx) {
		signals.AddReceive(src.ch, func(workflow.ReceiveChannel, bool) { src.take() })
	}
	// One coroutine serves every signal channel: a cached workflow holds one
	// goroutine for them, not one per channel. The selector takes the channels in
	// the order added, each until it is empty, as a coroutine per channel did.
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			signals.Select(ctx)
		}
	})
	return w, nil
}

// signalSource is one signal channel and how its signals are recorded in the state.
type signalSource struct {
	ch workflow.ReceiveChannel
	// take records one buffered signal; false when none is buffered.
	take func() bool
}

func source[T any](ch workflow.ReceiveChannel, apply func(T)) signalSource {
	return signalSource{ch: ch, take: func() bool {
		// A signal that does not decode is dropped, as Receive drops it.
		var v T
		if !ch.ReceiveAsync(&v) {
			return false
		}
		apply(v)
		return true
	}}
}

// signalSources lists every signal channel once, in the order the listener selects
// them, for both the listener and the drain before continue-as-new: a channel missing
// from one of two lists would lose its signals.
func (w *sessionWorkflow) signalSources(ctx workflow.Context) []signalSource {
	return []signalSource{
		source(w.inputs, w.s.Work.inputAccepted),
		source(w.answers, func(a InteractionAnswered) { w.s.Work.addAnswer(a.InteractionID) }),
		source(w.interrupts, func(in Interrupt) { w.s.Work.addInterrupt(in) }),
		source(w.permissions, func(PermissionModeChanged) { w.s.Work.PermissionMode = true }),
		source(w.stops, w.stopChildRun),
		source(w.lifecycles, func(l Lifecycle) { w.s.Work.addLifecycle(l) }),
		source(w.observations, func(o activities.SessionObservation) { w.observed(ctx, o) }),
	}
}

// drainSignals moves every signal still buffered into the state, before
// continue-as-new (unread signals would be lost otherwise).
func (w *sessionWorkflow) drainSignals(ctx workflow.Context) {
	w.draining = true
	for _, src := range w.signalSources(ctx) {
		for src.take() {
		}
	}
}

// stopChildRun records a child run to stop. A released or terminated runtime took
// its child runs with it, so there is nothing left to stop.
func (w *sessionWorkflow) stopChildRun(r StopChildRun) {
	if w.s.Phase == PhaseReleased || w.s.Phase == PhaseTerminated {
		return
	}
	w.s.Work.addStopChildRun(r.ChildRunID)
}

// run is the loop: each turn does the most urgent thing the state asks for, then
// waits for the state to change.
func (w *sessionWorkflow) run(ctx workflow.Context) error {
	if w.startedFresh {
		if done, err := w.load(ctx); done || err != nil {
			return err
		}
	}
	w.upsertSearch(ctx)
	for {
		switch {
		case len(w.modeChanges) > 0 && w.s.Phase != PhaseActive:
			// Asked of a runtime that is gone: the next one starts in these modes.
			w.storeQueuedModes(ctx)
			continue
		case w.s.Work.ending():
			return w.end(ctx)
		case w.s.Phase == PhaseTerminated:
			if w.s.Work.Recover {
				w.s.Work.Recover, w.s.TerminationRecorded = false, false
				w.s.Failures = 0
				w.setPhase(ctx, PhaseCreating)
				w.s.Need = NeedFresh
				continue
			}
		case w.s.Work.Release:
			w.s.Work.Release = false
			if w.s.Phase == PhaseActive || w.s.Placement.SandboxID != "" {
				w.releaseBox(ctx, false)
			}
			continue
		case w.s.Phase == PhaseReleased && w.s.Work.Deliver:
			w.setPhase(ctx, PhaseCreating)
			w.s.Need = NeedFresh
			continue
		case w.s.Need != NeedNone && w.s.Phase != PhaseReleased:
			w.bringUp(ctx)
			continue
		case w.relay != nil && w.relay.ended():
			w.relayEnded(ctx)
			continue
		case workflow.GetInfo(ctx).GetContinueAsNewSuggested() && len(w.modeChanges) == 0:
			// The new run hands over what is pending; it starts from a short history.
			return w.continueAsNew(ctx)
		case w.s.Phase == PhaseActive && w.relay == nil:
			w.startRelay(ctx)
			continue
		case w.s.Phase == PhaseActive && (w.s.Work.hostWork() || len(w.modeChanges) > 0):
			w.handOver(ctx)
			continue
		}
		w.s.Work.Recover = false
		if w.s.Phase == PhaseReleased || w.s.Phase == PhaseTerminated {
			// Nothing can reach a runtime that is not there (its child runs went with
			// it); the stored mode is applied when the next runtime connects.
			w.s.Work.Answers, w.s.Work.Interrupt, w.s.Work.PermissionMode = nil, nil, false
			w.s.Work.StopChildRuns = nil
		}
		if w.s.Phase == PhaseTerminated && !w.s.TerminationRecorded && w.terminatedRunsEnd(ctx) {
			if err := w.recordTerminationLater(ctx); err != nil {
				return err
			}
			continue
		}
		if change := w.endingChange(); change != "" {
			ends, err := w.quietRunEnds(ctx, change)
			if ends || err != nil {
				return err
			}
			continue
		}
		if err := w.wait(ctx); err != nil {
			return err
		}
	}
}

// endReleasedRunChange marks runs that end once their box is released and nothing is
// asked of them. Runs recorded before it wait, released, for their next signal.
const endReleasedRunChange = "end-released-run"

// endTerminatedRunChange marks runs that end once PostgreSQL records their Session
// TERMINATED and nothing is asked of them, and runs that, loading a Session recovered
// since (CREATING with no runtime), bring a runtime up. Runs recorded before it wait,
// terminated, for the recover signal.
const endTerminatedRunChange = "end-terminated-run"

// endingChange names the change under which a run with nothing to do ends, or is
// empty while the run must wait: a released Session holds nothing the next run cannot
// load from PostgreSQL, nor does a terminated one once its termination is recorded
// there. A termination that was not recorded (MarkTerminated failed) keeps the run, for
// a next run would find the Session as it was and bring a runtime up again.
func (w *sessionWorkflow) endingChange() string {
	switch {
	case w.s.Phase == PhaseReleased:
		return endReleasedRunChange
	case w.s.Phase == PhaseTerminated && w.s.TerminationRecorded:
		return endTerminatedRunChange
	}
	return ""
}

// terminationRetry is how long a run whose termination PostgreSQL did not record waits
// before it tries MarkTerminated again.
const terminationRetry = time.Minute

// terminatedRunsEnd reports whether this run is one that ends once its termination is
// recorded (endTerminatedRunChange).
func (w *sessionWorkflow) terminatedRunsEnd(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, endTerminatedRunChange, workflow.DefaultVersion, 1) >= 1
}

// recordTerminationLater waits for the loop to be asked something, or terminationRetry,
// then tries MarkTerminated again: until PostgreSQL says TERMINATED the API cannot
// recover the Session (a recovery needs that lifecycle), and the run cannot end.
func (w *sessionWorkflow) recordTerminationLater(ctx workflow.Context) error {
	asked, err := workflow.AwaitWithTimeout(ctx, terminationRetry, func() bool { return w.wake(ctx) })
	if err != nil || asked {
		return err
	}
	w.s.TerminationRecorded = w.markTerminated(ctx)
	return nil
}

// quietRunEnds decides, for a released Session or a terminated one, whether its run
// ends, under the change that made such runs end. A run that waits keeps its workflow
// in every worker's cache, so the run ends once nothing is asked of it and no update
// handler runs; the next signal or update starts a new run (the API's SignalWithStart
// and UpdateWithStart), which loads the Session from PostgreSQL. It reports false,
// after waiting for the handlers, when something was asked meanwhile, for the loop to
// do. A run recorded before the change waits for its next signal instead (wait) and
// reports false.
//
// A signal of the same workflow task may not be in its channel yet: while the signal
// coroutine's selector waits, the SDK hands it a new signal directly, and the
// selector records it only when that coroutine runs, after this one. The loop lets
// it run before deciding, so a signal in the task that would end the run is
// recorded and acted on. A signal that arrives while the task runs makes Temporal
// refuse the completion; the task that follows has it.
func (w *sessionWorkflow) quietRunEnds(ctx workflow.Context, change string) (bool, error) {
	if workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) < 1 {
		return false, w.wait(ctx)
	}
	if err := workflow.Await(ctx, func() bool { return w.wake(ctx) || workflow.AllHandlersFinished(ctx) }); err != nil {
		return false, err
	}
	if w.wake(ctx) {
		return false, nil
	}
	if err := yieldToSignals(ctx); err != nil {
		return false, err
	}
	return !w.wake(ctx) && workflow.AllHandlersFinished(ctx), nil
}

// yieldToSignals blocks the calling coroutine until every other coroutine, the
// signal coroutine among them, has had its turn: the coroutine it starts runs after
// them, in the order coroutines were started.
func yieldToSignals(ctx workflow.Context) error {
	turned := false
	workflow.Go(ctx, func(workflow.Context) { turned = true })
	return workflow.Await(ctx, func() bool { return turned })
}

// wake reports whether the loop has something to do.
func (w *sessionWorkflow) wake(ctx workflow.Context) bool {
	return w.asked(ctx) || (w.s.Phase == PhaseActive && w.relay == nil)
}

// asked reports whether the loop has something to do besides starting a live
// runtime's Relay.
func (w *sessionWorkflow) asked(ctx workflow.Context) bool {
	s := w.s
	switch {
	case s.Work.ending(), s.Work.Release, s.Need != NeedNone, len(w.modeChanges) > 0:
		return true
	case s.Phase == PhaseTerminated:
		return s.Work.Recover
	case s.Phase == PhaseReleased:
		return s.Work.Deliver
	case w.relay != nil && w.relay.ended():
		return true
	case s.Phase == PhaseActive && s.Work.hostWork():
		return true
	}
	return workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// wait blocks until the state asks for something; an active Session that stays quiet
// for the idle period is checked for idleness and its box released.
func (w *sessionWorkflow) wait(ctx workflow.Context) error {
	cond := func() bool { return w.wake(ctx) }
	if w.s.Phase != PhaseActive || w.s.IdleReleaseSeconds <= 0 {
		return workflow.Await(ctx, cond)
	}
	idle := time.Duration(w.s.IdleReleaseSeconds) * time.Second
	if w.idleTimerChange(ctx) < 1 {
		// Runs recorded before one idle timer replay the timer armed per wait.
		woke, err := workflow.AwaitWithTimeout(ctx, idle, cond)
		if err != nil || woke {
			return err
		}
	} else if woke, err := w.awaitQuiet(ctx, idle, cond); err != nil || woke {
		return err
	}
	if !w.checkIdle(ctx) || w.wake(ctx) {
		return nil
	}
	if workflow.GetVersion(ctx, idleCheckWithoutRelayChange, workflow.DefaultVersion, 1) >= 1 {
		// The Relay hands new inputs to the program on their notice, without the
		// workflow: an input sent since the check may be running. With the Relay
		// stopped nothing reaches the program but through this loop, so a second check
		// decides. A busy Session keeps its box, and the loop starts its Relay again.
		w.stopRelay(ctx)
		if !w.checkIdle(ctx) || w.asked(ctx) {
			return nil
		}
	}
	w.releaseBox(ctx, false)
	return nil
}

// idleCheckWithoutRelayChange marks runs that check idleness again, with the Relay
// stopped, before releasing an idle box. Runs recorded before it release on the first
// check, during which an input the Relay took on notice could be answering when the
// box went.
const idleCheckWithoutRelayChange = "idle-check-without-relay"

// checkIdle reports whether the Session is idle: its derived state READY, no
// response, interaction or held input open. A failed check says it is not.
func (w *sessionWorkflow) checkIdle(ctx workflow.Context) bool {
	var idleRes activities.IdleResult
	if err := workflow.ExecuteActivity(summarized(withShared(ctx), "Check whether the Session is idle"), act.CheckIdle, activities.SessionRef{SessionID: w.s.SessionID}).Get(ctx, &idleRes); err != nil {
		workflow.GetLogger(ctx).Warn("check idle", "error", err)
		return false
	}
	return idleRes.Idle
}

// oneIdleTimerChange marks runs that keep one idle timer across waits. A timer armed
// per wait (AwaitWithTimeout does not cancel its timer in this SDK) fired for every
// wait an idle period later, each a workflow task of its own: one a turn.
const oneIdleTimerChange = "one-idle-timer"

func (w *sessionWorkflow) idleTimerChange(ctx workflow.Context) workflow.Version {
	if w.idleTimerVersion == nil {
		v := workflow.GetVersion(ctx, oneIdleTimerChange, workflow.DefaultVersion, 1)
		w.idleTimerVersion = &v
	}
	return *w.idleTimerVersion
}

// awaitQuiet waits for cond or for the Session to stay quiet for idle from now,
// reporting whether cond woke it. It keeps the one idle timer armed across waits: a
// timer armed by an earlier wait fires before this wait's period is over and is
// re-armed for the rest of it, so a busy Session starts about one timer per idle
// period instead of one per wait.
func (w *sessionWorkflow) awaitQuiet(ctx workflow.Context, idle time.Duration, cond func() bool) (bool, error) {
	quietSince := workflow.Now(ctx)
	for {
		if w.idleTimer == nil {
			w.idleTimer = workflow.NewTimer(ctx, idle-workflow.Now(ctx).Sub(quietSince))
		}
		timer := w.idleTimer
		if err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil {
			return false, err
		}
		if timer.IsReady() {
			w.idleTimer = nil
		}
		if cond() {
			return true, nil
		}
		if workflow.Now(ctx).Sub(quietSince) >= idle {
			return false, nil
		}
	}
}

// continueAsNew hands the state to a new run: the Relay is stopped (the next run
// starts it again on the same host queue), handlers finish (the run loop served every
// queued permission mode first), and every buffered signal is drained into the
// carried state.
func (w *sessionWorkflow) continueAsNew(ctx workflow.Context) error {
	w.continuing = true
	w.stopRelay(ctx)
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	w.drainSignals(ctx)
	carry := w.s
	return workflow.NewContinueAsNewError(ctx, SessionWorkflowName, SessionStart{SessionID: w.s.SessionID, Carry: &carry})
}

func (w *sessionWorkflow) setPhase(ctx workflow.Context, p Phase) {
	if w.s.Phase == p {
		return
	}
	w.s.Phase = p
	w.upsertSearch(ctx)
}
