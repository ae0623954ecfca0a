package workflows

import "github.com/astrabox/astrabox/activities"

// Phase is where the workflow is in a Session's lifecycle. It is what the workflow
// itself knows; READY / PROCESSING / WAITING_INPUT are derived from PostgreSQL by the
// API and never kept here (invariant 6).
type Phase string

// The phases.
const (
	// PhaseCreating: no live runtime yet; one is being prepared or reconnected.
	PhaseCreating Phase = "CREATING"
	// PhaseActive: a runtime is live and a Relay reads it.
	PhaseActive Phase = "ACTIVE"
	// PhaseReleased: the box was released (idle or on request); the next input starts
	// a new box that resumes the conversation.
	PhaseReleased Phase = "RELEASED"
	// PhaseTerminated: the runtime is offline until a recover signal.
	PhaseTerminated Phase = "TERMINATED"
	// PhaseArchived and PhaseDeleted end the workflow.
	PhaseArchived Phase = "ARCHIVED"
	PhaseDeleted  Phase = "DELETED"
)

// RuntimeNeed says what the run loop must do to have a live runtime.
type RuntimeNeed string

// The runtime needs.
const (
	NeedNone RuntimeNeed = ""
	// NeedFresh: claim or create a box (restoring the conversation if it exists).
	NeedFresh RuntimeNeed = "fresh"
	// NeedReconnect: connect again to the current box, if it still lives.
	NeedReconnect RuntimeNeed = "reconnect"
)

// SessionState is the workflow's whole state: placement, flags, and the ids of work to
// hand over. Durable facts stay in PostgreSQL. It is carried across continue-as-new.
type SessionState struct {
	SessionID  string               `json:"session_id"`
	AgentID    string               `json:"agent_id"`
	EngineKind string               `json:"engine_kind"`
	Phase      Phase                `json:"phase"`
	Need       RuntimeNeed          `json:"need,omitempty"`
	Placement  activities.Placement `json:"placement"`
	// IdleReleaseSeconds is the idle period before the box is released (0: never).
	IdleReleaseSeconds int64 `json:"idle_release_seconds"`
	// Failures counts consecutive failed attempts to bring a runtime up; too many
	// terminate the runtime until a recover signal.
	Failures int `json:"failures,omitempty"`
	// Reconnects counts consecutive Relay ends without progress.
	Reconnects int `json:"reconnects,omitempty"`
	// TerminationRecorded: PostgreSQL records the Session TERMINATED (MarkTerminated
	// went through, or the run loaded it so), so a run that ends leaves the next one
	// to find it terminated rather than bring a runtime up again.
	TerminationRecorded bool  `json:"termination_recorded,omitempty"`
	ThroughSeq          int64 `json:"through_seq,omitempty"`
	Work                Work  `json:"work"`
	// AgentName and Owner name the Session for operators (current details).
	AgentName string `json:"agent_name,omitempty"`
	Owner     string `json:"owner,omitempty"`
	// Observed is the Session as the platform last derived it (LoadSession, then the
	// Relay's observations); the search attribute and current details show it.
	Observed activities.SessionObservation `json:"observed"`
}

// Work is what signals asked for and the loop has not done yet.
type Work struct {
	// Deliver: held inputs may wait; hand them to the runtime. While the Relay
	// delivers on PostgreSQL's notices (Observed.DeliversOnNotice) a new input is
	// left to it, unless DeliverInWorkflow.
	Deliver bool `json:"deliver,omitempty"`
	// DeliverInWorkflow: the workflow's Deliver runs even while the Relay delivers on
	// notice: a runtime just came up (inputs delivered to the one before are handed
	// over again), or an input is still held after the re-signal grace period.
	DeliverInWorkflow bool `json:"deliver_in_workflow,omitempty"`
	// Answers are interactions whose saved answers go to the runtime.
	Answers []string `json:"answers,omitempty"`
	// Interrupt, when set, stops the response in progress.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// PermissionMode: apply the Session's stored mode.
	PermissionMode bool `json:"permission_mode,omitempty"`
	// ReapplyPermissionMode: a mode was stored while no runtime was live; the runtime
	// being brought up may have read the previous one, so it is applied again once live.
	ReapplyPermissionMode bool `json:"reapply_permission_mode,omitempty"`
	// StopChildRuns are child runs to stop, in the order asked.
	StopChildRuns []string `json:"stop_child_runs,omitempty"`
	Archive       bool     `json:"archive,omitempty"`
	Delete        bool     `json:"delete,omitempty"`
	Recover       bool     `json:"recover,omitempty"`
	Release       bool     `json:"release,omitempty"`
}

// hostWork reports work that needs the live runtime.
func (w Work) hostWork() bool {
	return w.Deliver || len(w.Answers) > 0 || w.Interrupt != nil || w.PermissionMode || len(w.StopChildRuns) > 0
}

// inputAccepted records an input to hand to the runtime.
func (w *Work) inputAccepted(in InputAccepted) {
	w.Deliver = true
	w.DeliverInWorkflow = w.DeliverInWorkflow || in.Resent
}

// ending reports an archive or delete request.
func (w Work) ending() bool { return w.Archive || w.Delete }

// addAnswer records an interaction to answer once.
func (w *Work) addAnswer(id string) {
	for _, have := range w.Answers {
		if have == id {
			return
		}
	}
	w.Answers = append(w.Answers, id)
}

// addStopChildRun records a child run to stop once.
func (w *Work) addStopChildRun(id string) {
	for _, have := range w.StopChildRuns {
		if have == id {
			return
		}
	}
	w.StopChildRuns = append(w.StopChildRuns, id)
}

// addInterrupt merges an interrupt request: cancel_queued sticks once asked.
func (w *Work) addInterrupt(in Interrupt) {
	if w.Interrupt != nil && w.Interrupt.CancelQueued {
		in.CancelQueued = true
	}
	w.Interrupt = &in
}

// addLifecycle records a lifecycle request.
func (w *Work) addLifecycle(l Lifecycle) {
	switch l.Action {
	case LifecycleArchive:
		w.Archive = true
	case LifecycleDelete:
		w.Delete = true
	case LifecycleRecover:
		w.Recover = true
	case LifecycleRelease:
		w.Release = true
	}
}
