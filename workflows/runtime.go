package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// maxFailures is how many consecutive failed attempts to bring a runtime up (each
// already retried by its activity's policy) terminate the runtime until recovered.
const maxFailures = 3

// maxReconnects is how many consecutive Relay ends without progress are tolerated
// before the runtime is declared offline.
const maxReconnects = 5

// load reads the Session on a fresh start and derives the phase. done is true when
// the Session needs no workflow (unknown, archived or deleted).
func (w *sessionWorkflow) load(ctx workflow.Context) (done bool, err error) {
	var facts activities.SessionFacts
	err = workflow.ExecuteActivity(summarized(withShared(ctx), "Load the Session"), act.LoadSession, activities.SessionRef{SessionID: w.s.SessionID}).Get(ctx, &facts)
	if errorType(err) == activities.ErrTypeSessionGone {
		return true, nil
	}
	if err != nil {
		return true, err
	}
	w.s.AgentID, w.s.EngineKind = facts.AgentID, facts.EngineKind
	w.s.AgentName, w.s.Owner, w.s.Observed = facts.AgentName, facts.Owner, facts.Observed
	w.s.IdleReleaseSeconds = facts.IdleReleaseSeconds
	w.s.Placement = facts.Placement
	switch {
	case facts.Lifecycle == "deleted":
		w.s.Work.Delete = true
	case facts.Archived:
		w.s.Work.Archive = true
	case facts.Lifecycle == "terminated":
		w.s.Phase, w.s.TerminationRecorded = PhaseTerminated, true
	case facts.Lifecycle == "creating" && facts.RuntimeUnavailable && w.terminatedRunsEnd(ctx):
		// Recovered since its termination (a released Session is active): its run
		// ended TERMINATED, and this one brings the runtime the recovery asked for. A
		// run recorded before terminated runs ended found such a Session released.
		w.s.Phase, w.s.Need = PhaseCreating, NeedFresh
	case facts.RuntimeUnavailable:
		w.s.Phase = PhaseReleased
	case facts.Placement.SandboxID != "":
		// An earlier run placed a runtime (maybe before it finished activating it):
		// connect to it again if its box lives rather than leak it.
		w.s.Phase, w.s.Need = PhaseCreating, NeedReconnect
	default:
		w.s.Phase, w.s.Need = PhaseCreating, NeedFresh
	}
	return false, nil
}

// bringUp prepares a box (fresh or the current one) and activates the runtime on the
// host task queue of the worker that prepared it. A box found lost is reconciled and
// replaced; repeated failures terminate the runtime until a recover signal.
func (w *sessionWorkflow) bringUp(ctx workflow.Context) {
	log := workflow.GetLogger(ctx)
	w.stopRelay(ctx)
	// The activation applies the stored mode; only a mode stored after it read it
	// needs applying again.
	w.s.Work.ReapplyPermissionMode = false
	mode := activities.PrepareFresh
	if w.s.Need == NeedReconnect {
		mode = activities.PrepareReconnect
	}
	var prep activities.PrepareResult
	err := workflow.ExecuteActivity(summarized(withPrepare(ctx), "Prepare a runtime ("+string(mode)+")"), act.PrepareRuntime, activities.PrepareRequest{SessionID: w.s.SessionID, Mode: mode}).Get(ctx, &prep)
	switch errorType(err) {
	case "":
	case activities.ErrTypeRuntimeLost:
		log.Info("box lost; reconciling and replacing it", "sandbox_id", w.s.Placement.SandboxID)
		w.reconcileLost(ctx)
		w.s.Need = NeedFresh
		w.setPhase(ctx, PhaseCreating)
		return
	case activities.ErrTypeSessionGone:
		w.s.Work.Archive = true
		return
	default:
		log.Warn("prepare runtime", "error", err)
		w.failed(ctx, err)
		return
	}
	if prep.EngineKind != "" && prep.EngineKind != w.s.EngineKind {
		w.s.EngineKind = prep.EngineKind
		w.upsertSearch(ctx)
	}
	var activated activities.ActivateResult
	err = workflow.ExecuteActivity(summarized(withHeartbeat(withHost(ctx, prep.Placement.HostTaskQueue, 3*time.Minute)), fmt.Sprintf("Activate runtime generation %d in box %s", prep.Placement.RuntimeGeneration, prep.Placement.SandboxID)), act.ActivateRuntime, activities.ActivateRequest{
		SessionID:         w.s.SessionID,
		SandboxID:         prep.Placement.SandboxID,
		RuntimeGeneration: prep.Placement.RuntimeGeneration,
		AttachMode:        prep.AttachMode,
	}).Get(ctx, &activated)
	switch errorType(err) {
	case "":
	case activities.ErrTypeRuntimeLost:
		w.s.Placement = prep.Placement
		w.reconcileLost(ctx)
		w.s.Need = NeedFresh
		return
	case activities.ErrTypeWorkerLost:
		// The worker activating the runtime died; the box may live on. Reconnect
		// through a live worker: not a failure of the runtime's.
		log.Info("activate runtime: its worker died; reconnecting", "error", err)
		w.s.Placement = prep.Placement
		w.s.Need = NeedReconnect
		return
	case activities.ErrTypeRuntimeStateSaveRequired:
		// The box holds native state not yet in custody: the next attempt is made in
		// it, never in a replacement, and a Session that keeps failing is terminated
		// with the box kept.
		log.Warn("activate runtime: native state must be saved first", "error", err)
		w.s.Placement = prep.Placement
		w.s.Need = NeedReconnect
		w.failed(ctx, err)
		return
	default:
		log.Warn("activate runtime", "error", err)
		w.s.Placement = prep.Placement
		w.failed(ctx, err)
		return
	}
	w.s.Placement = prep.Placement
	w.s.Placement.HostTaskQueue = activated.HostTaskQueue
	w.s.Need, w.s.Failures = NeedNone, 0
	w.upsertRuntimeMemo(ctx, activated.RuntimeSummary)
	// Custody: whatever is held goes to the new runtime; its mode was applied on
	// connect, unless one was stored since.
	w.s.Work.Deliver, w.s.Work.DeliverInWorkflow, w.s.Work.PermissionMode = true, true, w.s.Work.ReapplyPermissionMode
	w.s.Work.ReapplyPermissionMode = false
	w.setPhase(ctx, PhaseActive)
}

// preparationRefusalChange versions the refusal of held inputs on a configuration
// failure: histories recorded before it count such a failure like any other.
const preparationRefusalChange = "preparation-refusal"

// failed counts a failed bring-up; too many terminate the runtime. A configuration
// failure is the deployment's preparation refusing to start the program: trying again
// cannot cure it, so the held messages fail at once with its reason (reported on the
// stream) and the runtime is terminated until recovered.
func (w *sessionWorkflow) failed(ctx workflow.Context, cause error) {
	if errorType(cause) == activities.ErrTypeConfiguration &&
		workflow.GetVersion(ctx, preparationRefusalChange, workflow.DefaultVersion, 1) >= 1 {
		err := workflow.ExecuteActivity(summarized(withShared(ctx), "Refuse the held messages: the runtime preparation refused"), act.RefuseHeldInputs, activities.RefuseRequest{
			SessionID: w.s.SessionID, Reason: refusalReason(cause),
		}).Get(ctx, nil)
		if err != nil {
			workflow.GetLogger(ctx).Warn("refuse held inputs", "error", err)
		}
		w.s.Work.Deliver, w.s.Work.DeliverInWorkflow = false, false
		w.terminate(ctx)
		return
	}
	w.s.Failures++
	if w.s.Failures < maxFailures {
		if w.s.Need == NeedNone {
			w.s.Need = NeedReconnect
		}
		return
	}
	w.terminate(ctx)
}

// terminate records the runtime offline (TERMINATED) until a recover signal.
func (w *sessionWorkflow) terminate(ctx workflow.Context) {
	w.stopRelay(ctx)
	w.s.TerminationRecorded = w.markTerminated(ctx)
	w.s.Need, w.s.Failures, w.s.Reconnects = NeedNone, 0, 0
	// Termination settled every open record; held inputs stay for a recovered runtime.
	w.s.Observed = activities.SessionObservation{State: stateTerminated, HeldInputs: w.s.Observed.HeldInputs, Title: w.s.Observed.Title}
	w.setPhase(ctx, PhaseTerminated)
}

// markTerminated frees the box, settles the runtime's records and records the Session
// TERMINATED, reporting whether PostgreSQL has it.
func (w *sessionWorkflow) markTerminated(ctx workflow.Context) bool {
	err := workflow.ExecuteActivity(summarized(withShared(ctx), "Terminate the runtime and settle its records"), act.MarkTerminated, activities.SessionRef{SessionID: w.s.SessionID}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("mark terminated", "error", err)
	}
	return err == nil
}

// reconcileLost settles the records of a runtime confirmed lost.
func (w *sessionWorkflow) reconcileLost(ctx workflow.Context) (heldOnNotice int) {
	w.stopRelay(ctx)
	var res activities.ReconcileResult
	err := workflow.ExecuteActivity(summarized(withShared(ctx), "Settle the records of a lost runtime"), act.ReconcileLostRuntime, activities.ReconcileRequest{SessionID: w.s.SessionID}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("reconcile lost runtime", "error", err)
	}
	w.s.Placement.SandboxID, w.s.Placement.HostTaskQueue = "", ""
	return res.HeldOnNotice
}

// startRelay starts the Session's reader on the host queue holding its connection.
func (w *sessionWorkflow) startRelay(ctx workflow.Context) {
	rctx, cancel := workflow.WithCancel(ctx)
	h := &relayHandle{cancel: cancel, queue: w.s.Placement.HostTaskQueue}
	req := activities.RelayRequest{RuntimeRef: w.runtimeRef()}
	if workflow.GetVersion(ctx, relayStoppedOnHostChange, workflow.DefaultVersion, 1) >= 1 {
		w.relaysStarted++
		req.RelayID = fmt.Sprintf("%s/%d", workflow.GetInfo(ctx).WorkflowExecution.RunID, w.relaysStarted)
		h.stop = activities.StopRelayRequest{RuntimeRef: req.RuntimeRef, RelayID: req.RelayID}
	}
	// Only this Relay's own word counts: until it says so, the workflow delivers.
	w.s.Observed.DeliversOnNotice = false
	f := workflow.ExecuteActivity(summarized(withRelay(rctx, h.queue), fmt.Sprintf("Read runtime generation %d and record its output", w.s.Placement.RuntimeGeneration)), act.Relay, req)
	w.relay = h
	if workflow.GetVersion(ctx, relayReadByLoopChange, workflow.DefaultVersion, 1) >= 1 {
		h.future = f
		return
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		h.err = f.Get(gctx, &h.result)
		h.done = true
	})
}

// relayStoppedOnHostChange marks runs that name each Relay and stop it through
// StopRelay on its host queue as well as by cancelling it. Temporal passes a
// cancellation to a running activity only in the reply to its next heartbeat, and a
// Relay heartbeats seldom (activities.DefaultRelayHeartbeatEvery): runs recorded
// before it waited up to a heartbeat's interval for their Relay to stop, their
// Session's stream stalled meanwhile when the stop was for a continue-as-new or an
// idle check that found the Session busy.
const relayStoppedOnHostChange = "relay-stopped-on-host"

// relayReadByLoopChange marks runs whose loop reads the Relay's future itself. Runs
// recorded before it wait on the future in a coroutine of its own, which a cached
// workflow held (a goroutine) for as long as its Relay ran, and whose turn to run
// ordered the Relay's end against the task's other events.
const relayReadByLoopChange = "relay-read-by-loop"

// ended reports whether the Relay has ended; its result is taken by settle.
func (h *relayHandle) ended() bool {
	return h.done || (h.future != nil && h.future.IsReady())
}

// settle takes the result of a Relay that ended; a ready future's Get does not block.
func (h *relayHandle) settle(ctx workflow.Context) {
	if !h.done && h.future != nil && h.future.IsReady() {
		h.err = h.future.Get(ctx, &h.result)
		h.done = true
	}
}

// stopRelay cancels the Relay, if one runs, and waits for its clean-up.
func (w *sessionWorkflow) stopRelay(ctx workflow.Context) {
	h := w.relay
	if h == nil {
		return
	}
	w.relay = nil
	if !h.ended() {
		h.cancel()
		if h.stop.RelayID != "" {
			// Not waited for: the Relay's end is what counts, and a host gone has its
			// Relay failed by the host watch while this waits out its start.
			workflow.ExecuteActivity(summarized(withStopRelay(ctx, h.queue), "Stop the Relay"), act.StopRelay, h.stop)
		}
		_ = workflow.Await(ctx, h.ended)
	}
	h.settle(ctx)
}

// relayEnded decides what follows a Relay that ended on its own: every end means the
// connection is gone, so reconnect; PrepareRuntime then tells a live box from a lost one.
func (w *sessionWorkflow) relayEnded(ctx workflow.Context) {
	h := w.relay
	w.relay = nil
	h.settle(ctx)
	if h.result.ThroughSeq > w.s.ThroughSeq {
		w.s.ThroughSeq, w.s.Reconnects = h.result.ThroughSeq, 0
	}
	w.s.Reconnects++
	workflow.GetLogger(ctx).Info("relay ended", "end", h.result.End, "error", h.err, "reconnects", w.s.Reconnects)
	if w.s.Reconnects > maxReconnects {
		w.terminate(ctx)
		return
	}
	w.s.Need = NeedReconnect
	w.setPhase(ctx, PhaseCreating)
}

// handOver passes the work signals and updates asked for to the live runtime:
// interrupt first (it does not withdraw held inputs), then the permission modes asked
// for (each stored once the program accepted it), the stored mode when it must be
// applied again, answers, child-run stops, and held inputs.
// A host that no longer answers means the connection is gone: reconnect and keep the work.
func (w *sessionWorkflow) handOver(ctx workflow.Context) {
	hctx := withHost(ctx, w.s.Placement.HostTaskQueue, time.Minute)
	say := func(summary string) workflow.Context { return summarized(hctx, summary) }
	ref := w.runtimeRef()
	if in := w.s.Work.Interrupt; in != nil {
		w.s.Work.Interrupt = nil
		err := workflow.ExecuteActivity(say("Interrupt the response in progress"), act.Interrupt, activities.InterruptRequest{
			SessionID: ref.SessionID, RuntimeGeneration: ref.RuntimeGeneration, CancelQueued: in.CancelQueued,
		}).Get(ctx, nil)
		if w.hostGone(ctx, err) {
			return
		}
	}
	if !w.applyModeChanges(ctx, hctx) {
		return
	}
	if w.s.Work.PermissionMode {
		w.s.Work.PermissionMode = false
		if w.hostGone(ctx, workflow.ExecuteActivity(say("Apply the stored permission mode"), act.SetPermissionMode, ref).Get(ctx, nil)) {
			return
		}
	}
	for len(w.s.Work.Answers) > 0 {
		id := w.s.Work.Answers[0]
		err := workflow.ExecuteActivity(say("Pass the answer of interaction "+id), act.Answer, activities.AnswerRequest{
			SessionID: ref.SessionID, RuntimeGeneration: ref.RuntimeGeneration, InteractionID: id,
		}).Get(ctx, nil)
		if w.hostGone(ctx, err) {
			return
		}
		w.s.Work.Answers = w.s.Work.Answers[1:]
	}
	for len(w.s.Work.StopChildRuns) > 0 {
		id := w.s.Work.StopChildRuns[0]
		err := workflow.ExecuteActivity(say("Stop child run "+id), act.StopChildRun, activities.StopChildRunRequest{
			SessionID: ref.SessionID, RuntimeGeneration: ref.RuntimeGeneration, ChildRunID: id,
		}).Get(ctx, nil)
		if errorType(err) == activities.ErrTypeChildRunNotStoppable {
			// Asking again cannot help: keep the reason for operators and drop the request.
			workflow.GetLogger(ctx).Warn("child run not stoppable", "child_run_id", id, "error", err)
		} else if w.hostGone(ctx, err) {
			return
		}
		w.s.Work.StopChildRuns = w.s.Work.StopChildRuns[1:]
	}
	if w.s.Work.Deliver {
		w.s.Work.Deliver = false
		// While the Relay hands new inputs over on PostgreSQL's notice, a Deliver
		// here would find nothing left and cost the turn an activity.
		if w.relay != nil && w.s.Observed.DeliversOnNotice && !w.s.Work.DeliverInWorkflow {
			return
		}
		w.s.Work.DeliverInWorkflow = false
		err := workflow.ExecuteActivity(say("Deliver the held messages"), act.Deliver, ref).Get(ctx, nil)
		if w.hostGone(ctx, err) {
			w.s.Work.Deliver, w.s.Work.DeliverInWorkflow = true, true
		}
	}
}

// hostGone reports a host activity failure that means the connection is gone, and
// schedules a reconnect; other failures are logged and the work dropped (the runtime
// refused it, and PostgreSQL keeps the facts).
func (w *sessionWorkflow) hostGone(ctx workflow.Context, err error) bool {
	switch errorType(err) {
	case "":
		return false
	case activities.ErrTypeNoLiveRuntime, activities.ErrTypeWorkerLost, "Timeout":
		w.stopRelay(ctx)
		w.s.Need = NeedReconnect
		w.setPhase(ctx, PhaseCreating)
		return true
	default:
		workflow.GetLogger(ctx).Warn("host activity failed", "error", err)
		return false
	}
}

// releaseBox stops the Relay, closes the connection, frees the box and settles what
// the released runtime left open; the next input starts a new box. A box whose native
// state could not be saved (RuntimeStateSaveRequired) is kept, unless ending says
// otherwise: the workflow reconnects to it and tries again at the next idle period.
func (w *sessionWorkflow) releaseBox(ctx workflow.Context, ending bool) {
	w.stopRelay(ctx)
	if q := w.s.Placement.HostTaskQueue; q != "" {
		// Best effort: a dead host has no connection to close.
		err := workflow.ExecuteActivity(summarized(withHost(ctx, q, 30*time.Second), "Close the runtime connection"), act.Disconnect, activities.SessionRef{SessionID: w.s.SessionID}).Get(ctx, nil)
		if errorType(err) == activities.ErrTypeRuntimeStateSaveRequired && !ending {
			workflow.GetLogger(ctx).Warn("keeping the box: its native state is not saved", "error", err)
			w.s.Need = NeedReconnect
			w.setPhase(ctx, PhaseCreating)
			return
		}
	}
	var released activities.ReleaseResult
	err := workflow.ExecuteActivity(summarized(withShared(ctx), "Release box "+w.s.Placement.SandboxID), act.Release, activities.ReleaseRequest{SessionID: w.s.SessionID, SandboxID: w.s.Placement.SandboxID}).Get(ctx, &released)
	if err != nil {
		workflow.GetLogger(ctx).Warn("release box", "error", err)
	}
	heldOnNotice := released.HeldOnNotice + w.reconcileLost(ctx)
	w.s.Need = NeedNone
	w.s.Observed = activities.SessionObservation{State: stateReady, HeldInputs: w.s.Observed.HeldInputs, Title: w.s.Observed.Title}
	w.setPhase(ctx, PhaseReleased)
	// Inputs accepted while the Relay took them on notice came without a signal; they
	// want a runtime as a signalled one does. The release counts them, or, when it
	// failed, the reconciliation that clears the record after it (histories recorded
	// before the results existed read zero).
	if heldOnNotice > 0 && !ending {
		w.s.Work.inputAccepted(InputAccepted{})
	}
}

// end archives or deletes: the box is released, held inputs fail with
// CONVERSATION_ENDED, and the workflow completes.
func (w *sessionWorkflow) end(ctx workflow.Context) error {
	if w.s.Placement.SandboxID != "" || w.s.Phase == PhaseActive {
		w.releaseBox(ctx, true)
	}
	var res activities.EndResult
	err := workflow.ExecuteActivity(summarized(withShared(ctx), endSummary(w.s.Work.Delete)), act.EndConversation, activities.EndRequest{SessionID: w.s.SessionID, Delete: w.s.Work.Delete}).Get(ctx, &res)
	if err != nil && errorType(err) != activities.ErrTypeSessionGone {
		return err
	}
	if w.s.Work.Delete {
		w.setPhase(ctx, PhaseDeleted)
	} else {
		w.setPhase(ctx, PhaseArchived)
	}
	// A permission-mode update still running gets its answer before the workflow ends.
	w.storeQueuedModes(ctx)
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func endSummary(deleted bool) string {
	if deleted {
		return "Delete the conversation: fail its held messages"
	}
	return "Archive the conversation: fail its held messages"
}

func (w *sessionWorkflow) runtimeRef() activities.RuntimeRef {
	return activities.RuntimeRef{SessionID: w.s.SessionID, RuntimeGeneration: w.s.Placement.RuntimeGeneration}
}
