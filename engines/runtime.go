package engines

import (
	"context"
	"iter"
)

// RuntimeClient is one live connection to one running conversation. AstraBox runs one
// reader per Session: exactly one process holds the Session's reader lease and the only
// connection to its runtime, so a client is written for one reader at a time; a new
// reader opens a new client. Methods may be called from several goroutines of that
// reader (Events runs while Submit, Answer or Interrupt are called).
//
// Optional members are separate interfaces the platform uses when the client implements
// them: PermissionModeSetter, ChildRunStopper and ServerInfoProvider.
type RuntimeClient interface {
	// EngineKind returns the adapter's engine_kind.
	EngineKind() string

	// IsLive reports whether the connection to the runtime is open.
	IsLive() bool

	// EngineSessionKey returns the vendor's conversation id. A replacement runtime
	// resumes this conversation.
	EngineSessionKey() string

	// Submit hands the runtime one input and returns once the runtime has received it.
	// It is idempotent by input id: where the vendor deduplicates by a message id, use
	// the input id (or a value derived from it); otherwise check the vendor's history,
	// queue or your own submissions before sending again. Receipt is not admission: the
	// client reports InputAdmitted only at the vendor record that survives a restart of
	// the runtime's process. Return a *RuntimeInputRefused when the runtime declines it.
	Submit(ctx context.Context, input RuntimeInput) error

	// Events yields the runtime's events after the cursor (from the start when after is
	// nil) for as long as the connection lives or ctx is not done. Reading again from the
	// same cursor must yield the same events in the same order. It yields an error
	// wrapping ErrRuntimeCursorExpired when the cursor is from another generation or its
	// position is no longer retained, one wrapping ErrRuntimeConnectionLost when the
	// connection ends, and ends after yielding any error. It ends without an error when
	// ctx is done.
	Events(ctx context.Context, after *RuntimeCursor) iter.Seq2[Event, error]

	// State returns the runtime's own account of itself now.
	State(ctx context.Context) (RuntimeState, error)

	// Answer passes a person's answer to an open interaction. A redelivery may return
	// nil when the runtime retains proof it accepted that answer; otherwise it returns an
	// error wrapping ErrInteractionNotOpen when no such interaction is open. Acceptance is
	// reported through a replayable InteractionClosed event with reason answered.
	Answer(ctx context.Context, interactionID string, answer InteractionAnswer) error

	// Interrupt stops the response in progress; with cancelQueued it also drops the
	// inputs queued behind it.
	Interrupt(ctx context.Context, cancelQueued bool) error

	// Committed tells the runtime AstraBox durably recorded every event through cursor.
	// A runtime that keeps history only until its reader has it may release what
	// precedes the cursor.
	Committed(ctx context.Context, cursor RuntimeCursor) error

	// Capabilities returns the connected runtime's manifest.
	Capabilities(ctx context.Context) (EngineCapabilityManifest, error)

	// Close closes the connection. The runtime itself keeps running.
	Close() error
}

// PermissionModeSetter is implemented by a client whose engine has permission modes.
// The reader calls it with the Session's stored mode when it connects and whenever the
// owner changes it. Registration requires it when the engine declares permission modes.
type PermissionModeSetter interface {
	SetPermissionMode(ctx context.Context, mode string) error
}

// ChildRunStopper is implemented by a client that can stop one child run (sub-agent)
// by the control reference its child facts carry (ChildRun.ControlRef). Registration
// requires it when the engine declares SupportsChildRunStop.
type ChildRunStopper interface {
	StopChildRun(ctx context.Context, controlRef string) error
}

// ServerInfoProvider is implemented by a client whose engine declares
// SupportsServerInfo. Engines without this optional observation remain usable.
type ServerInfoProvider interface {
	ServerInfo(ctx context.Context) (ServerInfo, error)
}

// ModelReporter is implemented by a client whose program names the model it runs
// (Claude Code's init message, the model Codex reports for its thread). ModelName is
// the model the program last reported for this runtime, empty until it has said; the
// platform shows it as the Session's model_name. Engines without it remain usable.
type ModelReporter interface {
	ModelName() string
}

// InputContentType names a kind of input content. The manifest lists the kinds a
// runtime accepts.
type InputContentType string

// The input content types.
const (
	InputText  InputContentType = "text"
	InputImage InputContentType = "image"
	InputFile  InputContentType = "file"
)

// RuntimeInput is one person's input handed to the runtime.
type RuntimeInput struct {
	// InputID is AstraBox's id of the input; the idempotency key of Submit.
	InputID string `json:"input_id"`
	// Content is the input's content in order.
	Content []InputContent `json:"content"`
}

// InputContent is one piece of input content.
type InputContent struct {
	// Type is the content type.
	Type InputContentType `json:"type"`
	// Text is the text of a text part.
	Text string `json:"text,omitempty"`
	// MediaType is the IANA media type of an image or file part.
	MediaType string `json:"media_type,omitempty"`
	// URL locates an image or file part (https or data URL).
	URL string `json:"url,omitempty"`
	// Filename is a file part's name.
	Filename string `json:"filename,omitempty"`
}

// TextInput builds a RuntimeInput holding one text part.
func TextInput(inputID, text string) RuntimeInput {
	return RuntimeInput{InputID: inputID, Content: []InputContent{{Type: InputText, Text: text}}}
}

// Control names an operation a connected runtime supports, listed in its manifest.
type Control string

// The controls.
const (
	ControlInterrupt             Control = "interrupt"
	ControlInterruptCancelQueued Control = "interrupt_cancel_queued"
	ControlSetPermissionMode     Control = "set_permission_mode"
	ControlStopChildRun          Control = "stop_child_run"
)

// EngineCapabilityManifest is the connected runtime's own account of what it supports.
type EngineCapabilityManifest struct {
	// EngineKind is the adapter's engine_kind.
	EngineKind string `json:"engine_kind"`
	// PermissionModes are the modes the runtime accepts; they must equal the adapter's
	// registered permission_modes (InitializeRuntimeClient checks).
	PermissionModes []string `json:"permission_modes"`
	// InputContentTypes are the input content types the runtime accepts.
	InputContentTypes []InputContentType `json:"input_content_types"`
	// Controls are the operations the runtime supports.
	Controls []Control `json:"controls"`
}

// HasControl reports whether the manifest lists c.
func (m EngineCapabilityManifest) HasControl(c Control) bool {
	for _, have := range m.Controls {
		if have == c {
			return true
		}
	}
	return false
}

// RuntimeState is the runtime's own account of itself, used by a new reader after
// RuntimeCursorExpired to reconcile the platform's records.
type RuntimeState struct {
	// Status is the runtime's status now.
	Status RuntimeStatus `json:"status"`
	// OpenResponses are the responses in progress. A response the platform recorded as
	// open and the runtime no longer reports ends as failed (runtime_lost).
	OpenResponses []OpenResponse `json:"open_responses"`
	// PendingInteractions are the interactions the runtime waits on.
	PendingInteractions []PendingInteraction `json:"pending_interactions"`
	// ClosedInteractions are the retained closure receipts; an interaction the runtime
	// no longer waits on and has no receipt for closes as expired.
	ClosedInteractions []ClosedInteraction `json:"closed_interactions"`
	// QueuedInputIDs are received but not yet consumed inputs, in order.
	QueuedInputIDs []string `json:"queued_input_ids"`
	// AdmittedInputIDs are inputs the runtime durably holds; a new reader closes custody
	// of inputs whose InputAdmitted it missed.
	AdmittedInputIDs []string `json:"admitted_input_ids"`
	// Cursor is where to continue reading events; nil means from the start.
	Cursor *RuntimeCursor `json:"cursor"`
}

// OpenResponse is a response in progress.
type OpenResponse struct {
	ResponseID string         `json:"response_id"`
	Origin     ResponseOrigin `json:"origin"`
	InputIDs   []string       `json:"input_ids"`
}

// PendingInteraction is an interaction the runtime waits on.
type PendingInteraction struct {
	ResponseID    string              `json:"response_id"`
	InteractionID string              `json:"interaction_id"`
	Contract      InteractionContract `json:"contract"`
}

// ClosedInteraction is a retained receipt that the runtime stopped waiting on an
// interaction, with why.
type ClosedInteraction struct {
	InteractionID string             `json:"interaction_id"`
	Reason        InteractionClosure `json:"reason"`
}
