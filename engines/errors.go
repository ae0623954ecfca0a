package engines

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors of the runtime contract. Check them with errors.Is; the typed errors
// below match them too.
var (
	// ErrRuntimeCursorExpired: the cursor is from another generation or its position is
	// no longer retained. The reader then reconciles from RuntimeClient.State.
	ErrRuntimeCursorExpired = errors.New("runtime cursor expired")
	// ErrInteractionNotOpen: the runtime holds no such open interaction.
	ErrInteractionNotOpen = errors.New("interaction not open")
	// ErrRuntimeInputRefused: the runtime declined an input.
	ErrRuntimeInputRefused = errors.New("runtime input refused")
	// ErrRuntimeConnectionLost: the connection to the runtime ended. A lost connection
	// is not a lost sandbox: the platform checks the sandbox and, while it lives, opens a
	// new client that resumes from the recorded cursor.
	ErrRuntimeConnectionLost = errors.New("runtime connection lost")
	// ErrChildRunNotStoppable: ChildRunStopper.StopChildRun was given a control
	// reference the runtime does not know or whose child run already ended. Asking again
	// does not help.
	ErrChildRunNotStoppable = errors.New("child run not stoppable")
	// ErrRuntimeControlRefused: the runtime answered a control request (a permission
	// mode, an interrupt...) with a refusal of its own. The connection is fine; asking
	// again the same way does not help.
	ErrRuntimeControlRefused = errors.New("runtime control refused")
)

// RuntimeControlRefused is the typed form of ErrRuntimeControlRefused: which control
// the runtime refused and its own words for why.
type RuntimeControlRefused struct {
	// Control is the refused operation.
	Control Control `json:"control"`
	// Code is the runtime's machine-readable reason, when it gives one.
	Code string `json:"code,omitempty"`
	// Message is the runtime's explanation, unchanged.
	Message string `json:"message"`
}

// Error implements error.
func (e *RuntimeControlRefused) Error() string {
	return fmt.Sprintf("runtime refused %s: %s", e.Control, e.Message)
}

// Is matches ErrRuntimeControlRefused.
func (e *RuntimeControlRefused) Is(target error) bool { return target == ErrRuntimeControlRefused }

// RuntimeInputRefused is returned by Submit when the runtime declines an input. The
// platform records the failure with the input and reports it as data-input-failed.
type RuntimeInputRefused struct {
	// Code is a stable machine-readable reason, in the engine's own words.
	Code string `json:"code"`
	// Message explains the refusal to a person.
	Message string `json:"message"`
	// StatusCode is the HTTP status that fits the refusal; 0 reads as 422.
	StatusCode int `json:"status_code"`
}

// Error implements error.
func (e *RuntimeInputRefused) Error() string {
	return fmt.Sprintf("runtime input refused: %s: %s", e.Code, e.Message)
}

// Is matches ErrRuntimeInputRefused.
func (e *RuntimeInputRefused) Is(target error) bool { return target == ErrRuntimeInputRefused }

// Status returns StatusCode, defaulting to 422 Unprocessable Entity.
func (e *RuntimeInputRefused) Status() int {
	if e.StatusCode == 0 {
		return http.StatusUnprocessableEntity
	}
	return e.StatusCode
}

// RuntimeCursorExpired is the typed form of ErrRuntimeCursorExpired, carrying the
// cursor that could not be resumed and why.
type RuntimeCursorExpired struct {
	Cursor RuntimeCursor
	Reason string
}

// Error implements error.
func (e *RuntimeCursorExpired) Error() string {
	return fmt.Sprintf("runtime cursor expired (generation %q): %s", e.Cursor.Generation, e.Reason)
}

// Is matches ErrRuntimeCursorExpired.
func (e *RuntimeCursorExpired) Is(target error) bool { return target == ErrRuntimeCursorExpired }

// InteractionNotOpen is the typed form of ErrInteractionNotOpen.
type InteractionNotOpen struct {
	InteractionID string
}

// Error implements error.
func (e *InteractionNotOpen) Error() string {
	return fmt.Sprintf("interaction %q not open", e.InteractionID)
}

// Is matches ErrInteractionNotOpen.
func (e *InteractionNotOpen) Is(target error) bool { return target == ErrInteractionNotOpen }

// RuntimeStateSaveRequired is returned by ActivateRuntime of an Assistant profile whose
// activation failed before its native-state release obligation was met: the adapter
// could not stop native writers and confirm the store and profile save. The platform
// retains the named allocation for recovery instead of releasing it.
type RuntimeStateSaveRequired struct {
	SandboxID       string
	RuntimeIdentity RuntimeIdentity
	Cause           error
}

// Error implements error.
func (e *RuntimeStateSaveRequired) Error() string {
	return fmt.Sprintf("runtime state save required for sandbox %s account %s: %v", e.SandboxID, e.RuntimeIdentity.Account, e.Cause)
}

// Unwrap returns the cause.
func (e *RuntimeStateSaveRequired) Unwrap() error { return e.Cause }
