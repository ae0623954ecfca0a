package activities

// Requests and results of the activities. They carry ids, placement and flags only:
// the workflow history never holds output parts or person-written content (invariant 5),
// with one exception made for operators: the Session's title (one line, at most 200
// characters), which names the Session in the Temporal UI next to its Agent and owner.

// Error types of non-retryable application errors the workflow switches on
// (temporal.NewNonRetryableApplicationError). Their values are stable: they are
// recorded in workflow histories.
const (
	// ErrTypeRuntimeLost: the box is confirmed gone; reconcile and replace it.
	ErrTypeRuntimeLost = "RuntimeLost"
	// ErrTypeNoLiveRuntime: this worker holds no live connection for the Session's
	// runtime generation (it restarted, or another worker holds it); reconnect.
	ErrTypeNoLiveRuntime = "NoLiveRuntime"
	// ErrTypeLeaseLost: a newer reader holds the Session's reader lease.
	ErrTypeLeaseLost = "LeaseLost"
	// ErrTypeSessionGone: the Session is deleted or unknown; the workflow ends.
	ErrTypeSessionGone = "SessionGone"
	// ErrTypeInteractionNotOpen: the runtime holds no such open interaction.
	ErrTypeInteractionNotOpen = "InteractionNotOpen"
	// ErrTypeConfiguration: the Agent, RuntimeProfile or engine cannot run (disabled,
	// unknown engine kind, invalid sandbox spec). Retrying does not help.
	ErrTypeConfiguration = "Configuration"
	// ErrTypeChildRunNotStoppable: the child run cannot be stopped (no control
	// reference, a runtime client without ChildRunStopper, or a reference the runtime
	// rejects). Retrying does not help; the workflow records it and drops the request.
	ErrTypeChildRunNotStoppable = "ChildRunNotStoppable"
	// ErrTypePermissionModeRefused: the Agent program refused a permission mode; the
	// error's message is the program's own. Retrying does not help, and nothing was
	// stored.
	ErrTypePermissionModeRefused = "PermissionModeRefused"
	// ErrTypeRuntimeStateSaveRequired: native state is still only in the box: the
	// adapter failed activation with engines.RuntimeStateSaveRequired, or the client's
	// save before a release failed. The box must be kept and the next attempt made in
	// it.
	ErrTypeRuntimeStateSaveRequired = "RuntimeStateSaveRequired"
	// ErrTypeWorkerLost: the worker running the activity stopped marking itself alive
	// and another worker failed the attempt for it (worker/hostwatch). An activity
	// taken from a host task queue fails for good, since its retry would wait on the
	// dead worker's queue, and the workflow reconnects through a live worker; any
	// other is retried.
	ErrTypeWorkerLost = "WorkerLost"
)

// SessionRef names a Session.
type SessionRef struct {
	SessionID string `json:"session_id"`
}

// SessionFacts is what the workflow needs from the Session row when it starts.
type SessionFacts struct {
	AgentID    string `json:"agent_id"`
	EngineKind string `json:"engine_kind"`
	// Lifecycle is the stored lifecycle: creating, active, terminated, deleted.
	Lifecycle string `json:"lifecycle"`
	Archived  bool   `json:"archived"`
	// RuntimeUnavailable: the box is gone or released.
	RuntimeUnavailable bool      `json:"runtime_unavailable"`
	Placement          Placement `json:"placement"`
	// IdleReleaseSeconds is the configured idle period before the box is released;
	// 0 disables idle release.
	IdleReleaseSeconds int64 `json:"idle_release_seconds"`
	// AgentName and Owner (the owner's user id, never personal data: workflow
	// history keeps it) name the Session for operators.
	AgentName string `json:"agent_name,omitempty"`
	Owner     string `json:"owner,omitempty"`
	// Observed is the Session as the platform derives it now.
	Observed SessionObservation `json:"observed"`
}

// SignalSessionObserved is the signal a Relay sends its Session's workflow when the
// Session's derived state or counts changed, so operators read them in the Temporal UI
// (search attribute and current details). The workflows package names it too.
const SignalSessionObserved = "session-observed"

// SessionObservation is the Session as the API derives it from PostgreSQL: its state
// (READY, PROCESSING, WAITING_INPUT, ...), what is open and held, and its title.
// DeliversOnNotice is the sending Relay's word that it hands every new input to the
// runtime on PostgreSQL's notice (it listens, and delivered what was held when it
// began to): the workflow then leaves a new input to it.
type SessionObservation struct {
	State            string `json:"state"`
	OpenResponses    int    `json:"open_responses,omitempty"`
	OpenInteractions int    `json:"open_interactions,omitempty"`
	HeldInputs       int    `json:"held_inputs,omitempty"`
	Title            string `json:"title,omitempty"`
	DeliversOnNotice bool   `json:"delivers_on_notice,omitempty"`
}
