// Package workflows holds AstraBox's Temporal workflows. SessionWorkflow is one
// per Session; its signals and their payloads are declared here so the API can
// send them without importing workflow code. Payloads carry ids only: durable
// facts live in PostgreSQL, which the workflow re-reads on every signal, so a
// repeated or late signal does no harm. The one update, UpdateSetPermissionMode,
// carries the mode itself: the program must accept it before it becomes a fact.
package workflows

import "github.com/astrabox/astrabox/activities"

// SessionWorkflowName is the registered name of the Session workflow.
const SessionWorkflowName = "SessionWorkflow"

// SessionWorkflowID is the workflow id of a Session's workflow.
func SessionWorkflowID(sessionID string) string { return "session/" + sessionID }

// Signal names of SessionWorkflow.
const (
	// SignalInputAccepted: an input row was written; hand held inputs over.
	SignalInputAccepted = "input-accepted"
	// SignalInteractionAnswered: an answer row was written for an open interaction.
	SignalInteractionAnswered = "interaction-answered"
	// SignalInterrupt: stop the response in progress.
	SignalInterrupt = "interrupt"
	// SignalPermissionModeChanged: the Session's stored permission mode changed; apply
	// it to the live runtime. The API now uses UpdateSetPermissionMode; the signal is
	// still handled for workflows that were sent it.
	SignalPermissionModeChanged = "permission-mode-changed"
	// SignalStopChildRun: stop one child run (sub-agent) of the running conversation.
	SignalStopChildRun = "stop-child-run"
	// SignalLifecycle: archive, delete, recover or release the Session's runtime.
	SignalLifecycle = "lifecycle"
	// SignalSessionObserved: the Relay saw the Session's derived state change
	// (payload activities.SessionObservation); shown to operators, never acted on.
	SignalSessionObserved = activities.SignalSessionObserved
)

// UpdateSetPermissionMode sets the Session's permission mode and answers once it holds.
// With a runtime live the mode is applied to it first and stored only when the program
// accepted it; a refusal fails the update with an application error of type
// ErrPermissionModeRefused whose message is the program's own, and nothing is stored.
// With no runtime live the mode is stored and the next runtime starts in it.
const UpdateSetPermissionMode = "set-permission-mode"

// ErrPermissionModeRefused is the application error type of a mode the Agent program
// refused (temporal.ApplicationError.Type).
const ErrPermissionModeRefused = activities.ErrTypePermissionModeRefused

// SetPermissionMode is the argument of UpdateSetPermissionMode.
type SetPermissionMode struct {
	PermissionMode string `json:"permission_mode"`
}

// PermissionModeSet is the result of UpdateSetPermissionMode.
type PermissionModeSet struct {
	// Applied: a live runtime took the mode now; false when it was stored for the
	// next runtime.
	Applied bool `json:"applied"`
}

// SessionStart is the workflow's input when a signal starts it.
type SessionStart struct {
	SessionID string `json:"session_id"`
	// Carry is the state a run hands to its continuation (continue-as-new); the API
	// leaves it nil.
	Carry *SessionState `json:"carry,omitempty"`
}

// InputAccepted is the payload of SignalInputAccepted. Resent marks the re-signal
// sweep's signal for an input still held after its grace period: the workflow then
// delivers itself, whoever else was to.
type InputAccepted struct {
	InputID string `json:"input_id"`
	Resent  bool   `json:"resent,omitempty"`
}

// InteractionAnswered is the payload of SignalInteractionAnswered.
type InteractionAnswered struct {
	InteractionID string `json:"interaction_id"`
}

// Interrupt is the payload of SignalInterrupt.
type Interrupt struct {
	// CancelQueued also drops the inputs the runtime queued behind the response.
	CancelQueued bool `json:"cancel_queued"`
	// RequestID correlates the request with the runtime's report of how it ended.
	RequestID string `json:"request_id"`
}

// PermissionModeChanged is the payload of SignalPermissionModeChanged.
type PermissionModeChanged struct {
	PermissionMode string `json:"permission_mode"`
}

// StopChildRun is the payload of SignalStopChildRun. The workflow's activity reads the
// child run's control reference from PostgreSQL.
type StopChildRun struct {
	ChildRunID string `json:"child_run_id"`
}

// LifecycleAction is what a lifecycle signal asks for.
type LifecycleAction string

// Lifecycle actions.
const (
	LifecycleArchive LifecycleAction = "archive"
	LifecycleDelete  LifecycleAction = "delete"
	LifecycleRecover LifecycleAction = "recover"
	LifecycleRelease LifecycleAction = "release"
)

// Lifecycle is the payload of SignalLifecycle.
type Lifecycle struct {
	Action LifecycleAction `json:"action"`
}
