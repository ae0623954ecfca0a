package activities

// Requests and results of the activities. They carry ids, placement and flags only:
// the workflow history never holds output parts or person-written content (invariant 5).

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
}

// Placement is where a Session's runtime is.
type Placement struct {
	SandboxID         string `json:"sandbox_id,omitempty"`
	HostTaskQueue     string `json:"host_task_queue,omitempty"`
	RuntimeGeneration int64  `json:"runtime_generation"`
}

// PrepareMode says what PrepareRuntime should do.
type PrepareMode string

// The prepare modes.
const (
	// PrepareFresh claims or creates a new box (a new Session, or a replacement after
	// loss or release; the conversation is resumed when the Session has one).
	PrepareFresh PrepareMode = "fresh"
	// PrepareReconnect checks that the Session's current box is alive, for a new
	// connection to it; it fails with ErrTypeRuntimeLost when the box is gone.
	PrepareReconnect PrepareMode = "reconnect"
)

// PrepareRequest asks PrepareRuntime for a box.
type PrepareRequest struct {
	SessionID string      `json:"session_id"`
	Mode      PrepareMode `json:"mode"`
}

// PrepareResult is the prepared box and the host task queue of the worker whose
// process will hold the runtime connection.
type PrepareResult struct {
	Placement Placement `json:"placement"`
	// AttachMode is empty for a new conversation, reconnect for the same box, restore
	// for a replacement box resuming the Session's conversation.
	AttachMode string `json:"attach_mode,omitempty"`
	EngineKind string `json:"engine_kind"`
}

// ActivateRequest asks ActivateRuntime to connect the runtime in a prepared box.
type ActivateRequest struct {
	SessionID         string `json:"session_id"`
	SandboxID         string `json:"sandbox_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	AttachMode        string `json:"attach_mode,omitempty"`
}

// ActivateResult is the live runtime's placement.
type ActivateResult struct {
	HostTaskQueue string `json:"host_task_queue"`
	// RuntimeSummary is the runtime-info snapshot in one line (program version,
	// runner and adapter builds), for the workflow's memo.
	RuntimeSummary string `json:"runtime_summary,omitempty"`
}

// RuntimeRef names a Session's runtime generation, for host activities.
type RuntimeRef struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
}

// RelayEnd says why a Relay ended without an error.
type RelayEnd string

// The relay ends.
const (
	// RelayConnectionLost: the connection dropped; the box may live (reconnect).
	RelayConnectionLost RelayEnd = "connection_lost"
)

// RelayResult is how a Relay ended.
type RelayResult struct {
	End RelayEnd `json:"end"`
	// ThroughSeq is the last output seq the Relay committed.
	ThroughSeq int64 `json:"through_seq"`
}

// RelayProgress is a Relay's heartbeat detail.
type RelayProgress struct {
	LeaseGeneration int64 `json:"lease_generation"`
	ThroughSeq      int64 `json:"through_seq"`
}

// DeliverResult lists the inputs handed to the runtime and the ones it refused.
type DeliverResult struct {
	Delivered []string `json:"delivered"`
	Refused   []string `json:"refused"`
}

// AnswerRequest passes a saved answer to the runtime.
type AnswerRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	InteractionID     string `json:"interaction_id"`
}

// InterruptRequest stops the response in progress.
type InterruptRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	CancelQueued      bool   `json:"cancel_queued"`
}

// PermissionModeRequest names a permission mode for a Session: to apply to its live
// runtime generation (ApplyPermissionMode), or to store (StorePermissionMode, which
// ignores the generation).
type PermissionModeRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation,omitempty"`
	PermissionMode    string `json:"permission_mode"`
}

// StopChildRunRequest asks the runtime to stop one child run; the control reference is
// read from PostgreSQL by the activity, never carried in the history.
type StopChildRunRequest struct {
	SessionID         string `json:"session_id"`
	RuntimeGeneration int64  `json:"runtime_generation"`
	ChildRunID        string `json:"child_run_id"`
}

// ReconcileRequest settles the records of a runtime confirmed lost.
type ReconcileRequest struct {
	SessionID string `json:"session_id"`
}

// RefuseRequest fails the Session's held inputs with the preparation's refusal.
type RefuseRequest struct {
	SessionID string `json:"session_id"`
	// Reason is the refusal as the preparation said it.
	Reason string `json:"reason"`
}

// ReleaseRequest frees a Session's box.
type ReleaseRequest struct {
	SessionID string `json:"session_id"`
	SandboxID string `json:"sandbox_id"`
}

// IdleResult says whether a Session is idle enough to release its box.
type IdleResult struct {
	Idle bool `json:"idle"`
}

// EndRequest ends a conversation: held inputs fail with CONVERSATION_ENDED, and a
// delete moves the Session to deleted.
type EndRequest struct {
	SessionID string `json:"session_id"`
	Delete    bool   `json:"delete"`
}

// EndResult lists the inputs that failed.
type EndResult struct {
	FailedInputs []string `json:"failed_inputs"`
}
