// Package sessionstate derives a Session's public state from the facts PostgreSQL
// records about it. The state is never stored (DESIGN invariant 6): READY, PROCESSING
// and WAITING_INPUT follow from the Agent program's last reported runtime status, the
// responses and interactions it opened and has not closed, and the inputs AstraBox
// still holds; CREATING, TERMINATED and DELETED follow from the lifecycle marker, the
// one fact that cannot be derived.
package sessionstate

// State is a Session's public status, as the Sessions API spells it.
type State string

// The Session states.
const (
	Creating     State = "CREATING"
	Ready        State = "READY"
	Processing   State = "PROCESSING"
	WaitingInput State = "WAITING_INPUT"
	Terminated   State = "TERMINATED"
	Deleted      State = "DELETED"
)

// Lifecycle markers as the sessions.lifecycle column stores them.
const (
	LifecycleCreating   = "creating"
	LifecycleActive     = "active"
	LifecycleTerminated = "terminated"
	LifecycleDeleted    = "deleted"
)

// Runtime statuses as the Agent program reports them (sessions.runtime_status).
const (
	RuntimeWorking = "working"
	RuntimeWaiting = "waiting"
	RuntimeIdle    = "idle"
)

// Facts are what the state is derived from.
type Facts struct {
	// Lifecycle is the sessions.lifecycle marker.
	Lifecycle string
	// Deleted is true when the row carries deleted_at; it wins over any lifecycle.
	Deleted bool
	// RuntimeStatus is the program's last report: working, waiting, idle or "" (none yet).
	RuntimeStatus string
	// OpenResponses counts responses the program started and has not ended.
	OpenResponses int
	// OpenInteractions counts approvals and questions the program has not closed.
	OpenInteractions int
	// HeldInputs counts accepted inputs the program has not admitted (pending or delivered).
	HeldInputs int
}

// Derive returns the state the facts describe. Precedence, highest first:
//   - DELETED and TERMINATED come from the lifecycle marker alone: an offline runtime
//     reports nothing current.
//   - CREATING holds until the runtime is ready; messages sent meanwhile are held and
//     do not make the Session PROCESSING, since nothing runs yet.
//   - WAITING_INPUT: a response is paused on an open interaction, or the program itself
//     reports that it waits. A paused response wins over held inputs, because the held
//     messages cannot run before someone answers.
//   - PROCESSING: the program reports working, a response is open, or AstraBox still
//     holds messages the program has not taken.
//   - READY otherwise. A released runtime (runtime_unavailable) is still READY: the next
//     message starts a new one.
//
// An unknown lifecycle value reads as active, so a newer marker never hides the
// runtime's own report.
func Derive(f Facts) State {
	switch {
	case f.Deleted || f.Lifecycle == LifecycleDeleted:
		return Deleted
	case f.Lifecycle == LifecycleTerminated:
		return Terminated
	case f.Lifecycle == LifecycleCreating:
		return Creating
	case f.OpenInteractions > 0 || f.RuntimeStatus == RuntimeWaiting:
		return WaitingInput
	case f.RuntimeStatus == RuntimeWorking || f.OpenResponses > 0 || f.HeldInputs > 0:
		return Processing
	default:
		return Ready
	}
}

// AcceptsInput reports whether a Session in state s accepts a new message: every
// state except TERMINATED and DELETED does.
func (s State) AcceptsInput() bool { return s != Terminated && s != Deleted }
