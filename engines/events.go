package engines

import (
	"encoding/json"
)

// EventType is the stable tag of a runtime event in its JSON envelope.
type EventType string

// The runtime event types: a closed set.
const (
	EventInputAdmitted     EventType = "input_admitted"
	EventResponseStarted   EventType = "response_started"
	EventResponseOutput    EventType = "response_output"
	EventInteractionOpened EventType = "interaction_opened"
	EventInteractionClosed EventType = "interaction_closed"
	EventResponseEnded     EventType = "response_ended"
	EventStatusChanged     EventType = "status_changed"
	EventRuntimeDiagnostic EventType = "runtime_diagnostic"
)

// Event is one runtime event. The set is closed: only the types in this package
// implement it. Each event carries the cursor to resume after it and keeps the vendor's
// own words. Encode events with MarshalEvent (or EventEnvelope) for storage.
type Event interface {
	// Type returns the event's tag.
	Type() EventType
	// EventCursor returns the cursor to resume after this event.
	EventCursor() RuntimeCursor
	// Validate checks the event's fields.
	Validate() error
	isRuntimeEvent()
}

// ResponseOrigin says why a response started.
type ResponseOrigin string

// The response origins.
const (
	// OriginInput: the response answers submitted inputs.
	OriginInput ResponseOrigin = "input"
	// OriginEngine: the runtime started the response on its own (a scheduled job, a
	// background task finishing).
	OriginEngine ResponseOrigin = "engine"
)

// InteractionClosure says why the runtime stopped waiting on an interaction.
type InteractionClosure string

// The interaction closure reasons.
const (
	ClosureAnswered  InteractionClosure = "answered"
	ClosureWithdrawn InteractionClosure = "withdrawn"
	ClosureExpired   InteractionClosure = "expired"
)

// ResponseOutcome is the adapter's declared reading of the vendor's ending.
type ResponseOutcome string

// The response outcomes.
const (
	OutcomeCompleted ResponseOutcome = "completed"
	OutcomeFailed    ResponseOutcome = "failed"
	OutcomeCancelled ResponseOutcome = "cancelled"
)

// NativeReasonRuntimeLost is the native_reason the platform records when it ends a
// response on reconciliation after the runtime was confirmed lost.
const NativeReasonRuntimeLost = "runtime_lost"

// RuntimeStatus is the runtime's own status.
type RuntimeStatus string

// The runtime statuses.
const (
	// StatusWorking: the runtime works, including on background work it started itself.
	StatusWorking RuntimeStatus = "working"
	// StatusWaiting: a response is paused on a person.
	StatusWaiting RuntimeStatus = "waiting"
	// StatusIdle: nothing runs.
	StatusIdle RuntimeStatus = "idle"
)

// InputAdmitted reports that the runtime durably holds an input: a restart of the
// runtime's process would still answer it. After admission AstraBox never sends the
// input again, so report it only at the vendor record that survives a restart (such as
// the user message in the vendor's transcript), never at a delivery receipt.
type InputAdmitted struct {
	Cursor  RuntimeCursor `json:"cursor"`
	InputID string        `json:"input_id"`
}

// ResponseStarted reports that the runtime began a response. ResponseID must be stable
// for the life of the response, including across a new reader: derive it from the
// vendor's ids.
type ResponseStarted struct {
	Cursor     RuntimeCursor  `json:"cursor"`
	ResponseID string         `json:"response_id"`
	Origin     ResponseOrigin `json:"origin"`
	// InputIDs are the inputs the response answers so far (empty for engine origin).
	InputIDs []string `json:"input_ids"`
}

// ResponseOutput carries one browser part: an AI SDK UI message chunk translated from
// the vendor's output. Build it with NewResponseOutput so PublicFrame applies.
type ResponseOutput struct {
	Cursor RuntimeCursor `json:"cursor"`
	// ResponseID is empty only for output that belongs to no response, such as a child
	// run's status.
	ResponseID string `json:"response_id,omitempty"`
	Frame      Frame  `json:"frame"`
}

// InteractionOpened reports that a response is paused on a person.
type InteractionOpened struct {
	Cursor        RuntimeCursor       `json:"cursor"`
	ResponseID    string              `json:"response_id"`
	InteractionID string              `json:"interaction_id"`
	Contract      InteractionContract `json:"contract"`
}

// InteractionClosed reports that the runtime no longer waits on an interaction. An
// accepted answer is reported by a replayable InteractionClosed with reason answered;
// an answer saved in the platform database does not establish acceptance.
type InteractionClosed struct {
	Cursor        RuntimeCursor      `json:"cursor"`
	InteractionID string             `json:"interaction_id"`
	Reason        InteractionClosure `json:"reason"`
}

// ResponseEnded reports that the runtime ended a response, on the program's own signal.
type ResponseEnded struct {
	Cursor     RuntimeCursor   `json:"cursor"`
	ResponseID string          `json:"response_id"`
	Outcome    ResponseOutcome `json:"outcome"`
	// NativeReason is the vendor's own word for the ending, unchanged (e.g. end_turn,
	// aborted_streaming, interrupted).
	NativeReason string `json:"native_reason"`
	// Usage is the vendor's usage record verbatim, or null.
	Usage json.RawMessage `json:"usage"`
	// Error describes a failure, or is nil.
	Error *ResponseError `json:"error"`
}

// ResponseError describes why a response failed, in the vendor's words.
type ResponseError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// StatusChanged reports the runtime's own status.
type StatusChanged struct {
	Cursor RuntimeCursor `json:"cursor"`
	Status RuntimeStatus `json:"status"`
}

// RuntimeDiagnostic is raw vendor evidence for operators; it never reaches a browser.
// Local request failures are kept as diagnostics rather than invented results.
type RuntimeDiagnostic struct {
	Cursor    RuntimeCursor   `json:"cursor"`
	EventType string          `json:"event_type"`
	Raw       json.RawMessage `json:"raw"`
}

// NewResponseOutput builds a ResponseOutput whose frame has passed through PublicFrame.
func NewResponseOutput(cursor RuntimeCursor, responseID string, frame Frame) ResponseOutput {
	return ResponseOutput{Cursor: cursor, ResponseID: responseID, Frame: PublicFrame(frame)}
}

func (InputAdmitted) isRuntimeEvent()     {}
func (ResponseStarted) isRuntimeEvent()   {}
func (ResponseOutput) isRuntimeEvent()    {}
func (InteractionOpened) isRuntimeEvent() {}
func (InteractionClosed) isRuntimeEvent() {}
func (ResponseEnded) isRuntimeEvent()     {}
func (StatusChanged) isRuntimeEvent()     {}
func (RuntimeDiagnostic) isRuntimeEvent() {}

// Type implements Event.
func (InputAdmitted) Type() EventType { return EventInputAdmitted }

// Type implements Event.
func (ResponseStarted) Type() EventType { return EventResponseStarted }

// Type implements Event.
func (ResponseOutput) Type() EventType { return EventResponseOutput }

// Type implements Event.
func (InteractionOpened) Type() EventType { return EventInteractionOpened }

// Type implements Event.
func (InteractionClosed) Type() EventType { return EventInteractionClosed }

// Type implements Event.
func (ResponseEnded) Type() EventType { return EventResponseEnded }

// Type implements Event.
func (StatusChanged) Type() EventType { return EventStatusChanged }

// Type implements Event.
func (RuntimeDiagnostic) Type() EventType { return EventRuntimeDiagnostic }

// EventCursor implements Event.
func (e InputAdmitted) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e ResponseStarted) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e ResponseOutput) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e InteractionOpened) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e InteractionClosed) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e ResponseEnded) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e StatusChanged) EventCursor() RuntimeCursor { return e.Cursor }

// EventCursor implements Event.
func (e RuntimeDiagnostic) EventCursor() RuntimeCursor { return e.Cursor }

// MarshalJSON encodes absent input ids as an empty list, so stored responses of engine
// origin read the same whether or not the adapter allocated the slice.
func (e ResponseStarted) MarshalJSON() ([]byte, error) {
	type plain ResponseStarted
	if e.InputIDs == nil {
		e.InputIDs = []string{}
	}
	return json.Marshal(plain(e))
}
