package engines

import "encoding/json"

// The typed chunks of the AI SDK UI Message Stream, as accepted by ai@7.0.173's
// uiMessageChunkSchema. Members the schema requires are always encoded (input, output,
// data and messageMetadata as null when empty); optional members are omitted when empty.
// The experimental steering-message chunk is not modelled.

// ProviderMetadata is the two-level provider metadata object: provider, then key.
// AstraBox's own entries live under the "astrabox" provider.
type ProviderMetadata map[string]map[string]any

// FinishReason is the finishReason of a finish chunk.
type FinishReason string

// The finish reasons ai@7 accepts. The portable ones (accepted by ai 5, 6 and 7) are
// all but FinishInterrupted.
const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishContentFilter FinishReason = "content-filter"
	FinishToolCalls     FinishReason = "tool-calls"
	FinishError         FinishReason = "error"
	FinishInterrupted   FinishReason = "interrupted"
	FinishOther         FinishReason = "other"
)

// StartChunk opens a message. AstraBox's responses use ResponseStartFrame instead.
type StartChunk struct {
	MessageID       string          `json:"messageId,omitempty"`
	MessageMetadata json.RawMessage `json:"messageMetadata,omitempty"`
}

// FinishChunk closes a message segment.
type FinishChunk struct {
	FinishReason    FinishReason    `json:"finishReason,omitempty"`
	MessageMetadata json.RawMessage `json:"messageMetadata,omitempty"`
}

// AbortChunk marks an aborted stream.
type AbortChunk struct {
	Reason string `json:"reason,omitempty"`
}

// StartStepChunk opens a step.
type StartStepChunk struct{}

// FinishStepChunk closes a step.
type FinishStepChunk struct{}

// ResetStepChunk removes all parts since the last step start (ai@7 only).
type ResetStepChunk struct{}

// MessageMetadataChunk merges metadata into the message; MessageMetadata is required.
type MessageMetadataChunk struct {
	MessageMetadata json.RawMessage `json:"messageMetadata"`
}

// ErrorChunk reports an error; emit it only before a response's finish.
type ErrorChunk struct {
	ErrorText string `json:"errorText"`
}

// TextStartChunk opens a text part.
type TextStartChunk struct {
	ID               string           `json:"id"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// TextDeltaChunk appends to a text part.
type TextDeltaChunk struct {
	ID               string           `json:"id"`
	Delta            string           `json:"delta"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// TextEndChunk closes a text part.
type TextEndChunk struct {
	ID               string           `json:"id"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ReasoningStartChunk opens a reasoning part.
type ReasoningStartChunk struct {
	ID               string           `json:"id"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ReasoningDeltaChunk appends to a reasoning part.
type ReasoningDeltaChunk struct {
	ID               string           `json:"id"`
	Delta            string           `json:"delta"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ReasoningEndChunk closes a reasoning part.
type ReasoningEndChunk struct {
	ID               string           `json:"id"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ToolInputStartChunk opens a tool call. ToolName is the program's own, verbatim.
type ToolInputStartChunk struct {
	ToolCallID       string           `json:"toolCallId"`
	ToolName         string           `json:"toolName"`
	ProviderExecuted *bool            `json:"providerExecuted,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
	Dynamic          bool             `json:"dynamic,omitempty"`
	Title            string           `json:"title,omitempty"`
}

// ToolInputDeltaChunk streams tool input text.
type ToolInputDeltaChunk struct {
	ToolCallID     string `json:"toolCallId"`
	InputTextDelta string `json:"inputTextDelta"`
}

// ToolInputAvailableChunk carries the complete tool input, verbatim; Input is required
// and encodes as null when empty.
type ToolInputAvailableChunk struct {
	ToolCallID       string           `json:"toolCallId"`
	ToolName         string           `json:"toolName"`
	Input            json.RawMessage  `json:"input"`
	ProviderExecuted *bool            `json:"providerExecuted,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
	Dynamic          bool             `json:"dynamic,omitempty"`
	Title            string           `json:"title,omitempty"`
}

// ToolInputErrorChunk reports an invalid tool input; Input is required.
type ToolInputErrorChunk struct {
	ToolCallID       string           `json:"toolCallId"`
	ToolName         string           `json:"toolName"`
	Input            json.RawMessage  `json:"input"`
	ErrorText        string           `json:"errorText"`
	ProviderExecuted *bool            `json:"providerExecuted,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
	Dynamic          bool             `json:"dynamic,omitempty"`
	Title            string           `json:"title,omitempty"`
}

// ToolApprovalRequestChunk asks a person to approve a tool call. The tool part must
// already exist (emit the tool input first).
type ToolApprovalRequestChunk struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	Reason     string `json:"reason,omitempty"`
}

// ToolApprovalResponseChunk records a decision on an approval (ai@7 only).
type ToolApprovalResponseChunk struct {
	ApprovalID string `json:"approvalId"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

// ToolOutputAvailableChunk carries a tool result, verbatim; Output is required and
// encodes as null when empty.
type ToolOutputAvailableChunk struct {
	ToolCallID       string           `json:"toolCallId"`
	Output           json.RawMessage  `json:"output"`
	ProviderExecuted *bool            `json:"providerExecuted,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
	Preliminary      *bool            `json:"preliminary,omitempty"`
}

// ToolOutputErrorChunk reports a failed tool call.
type ToolOutputErrorChunk struct {
	ToolCallID       string           `json:"toolCallId"`
	ErrorText        string           `json:"errorText"`
	ProviderExecuted *bool            `json:"providerExecuted,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ToolOutputDeniedChunk reports a tool call a person denied.
type ToolOutputDeniedChunk struct {
	ToolCallID string `json:"toolCallId"`
}

// SourceURLChunk cites a URL.
type SourceURLChunk struct {
	SourceID         string           `json:"sourceId"`
	URL              string           `json:"url"`
	Title            string           `json:"title,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// SourceDocumentChunk cites a document; Title is required by the schema.
type SourceDocumentChunk struct {
	SourceID         string           `json:"sourceId"`
	MediaType        string           `json:"mediaType"`
	Title            string           `json:"title"`
	Filename         string           `json:"filename,omitempty"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// FileChunk attaches a file by http(s) or data URL.
type FileChunk struct {
	URL              string           `json:"url"`
	MediaType        string           `json:"mediaType"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// ReasoningFileChunk attaches a file to reasoning (ai@7 only).
type ReasoningFileChunk struct {
	URL              string           `json:"url"`
	MediaType        string           `json:"mediaType"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// CustomChunk is a provider-specific part (ai@7 only); Kind reads "<provider>.<type>".
type CustomChunk struct {
	Kind             string           `json:"kind"`
	ProviderMetadata ProviderMetadata `json:"providerMetadata,omitempty"`
}

// DataChunk is a data-<Name> part. Data is required and encodes as null when empty.
// Parts with the same type and ID replace each other in place; Transient parts reach
// the client's onData but are not stored in the message.
type DataChunk struct {
	Name      string          `json:"-"`
	ID        string          `json:"id,omitempty"`
	Data      json.RawMessage `json:"data"`
	Transient bool            `json:"transient,omitempty"`
}

// ChunkType implements Chunk.
func (StartChunk) ChunkType() string { return "start" }

// ChunkType implements Chunk.
func (FinishChunk) ChunkType() string { return "finish" }

// ChunkType implements Chunk.
func (AbortChunk) ChunkType() string { return "abort" }

// ChunkType implements Chunk.
func (StartStepChunk) ChunkType() string { return "start-step" }

// ChunkType implements Chunk.
func (FinishStepChunk) ChunkType() string { return "finish-step" }

// ChunkType implements Chunk.
func (ResetStepChunk) ChunkType() string { return "reset-step" }

// ChunkType implements Chunk.
func (MessageMetadataChunk) ChunkType() string { return "message-metadata" }

// ChunkType implements Chunk.
func (ErrorChunk) ChunkType() string { return "error" }

// ChunkType implements Chunk.
func (TextStartChunk) ChunkType() string { return "text-start" }

// ChunkType implements Chunk.
func (TextDeltaChunk) ChunkType() string { return "text-delta" }

// ChunkType implements Chunk.
func (TextEndChunk) ChunkType() string { return "text-end" }

// ChunkType implements Chunk.
func (ReasoningStartChunk) ChunkType() string { return "reasoning-start" }

// ChunkType implements Chunk.
func (ReasoningDeltaChunk) ChunkType() string { return "reasoning-delta" }

// ChunkType implements Chunk.
func (ReasoningEndChunk) ChunkType() string { return "reasoning-end" }

// ChunkType implements Chunk.
func (ToolInputStartChunk) ChunkType() string { return "tool-input-start" }

// ChunkType implements Chunk.
func (ToolInputDeltaChunk) ChunkType() string { return "tool-input-delta" }

// ChunkType implements Chunk.
func (ToolInputAvailableChunk) ChunkType() string { return "tool-input-available" }

// ChunkType implements Chunk.
func (ToolInputErrorChunk) ChunkType() string { return "tool-input-error" }

// ChunkType implements Chunk.
func (ToolApprovalRequestChunk) ChunkType() string { return "tool-approval-request" }

// ChunkType implements Chunk.
func (ToolApprovalResponseChunk) ChunkType() string { return "tool-approval-response" }

// ChunkType implements Chunk.
func (ToolOutputAvailableChunk) ChunkType() string { return "tool-output-available" }

// ChunkType implements Chunk.
func (ToolOutputErrorChunk) ChunkType() string { return "tool-output-error" }

// ChunkType implements Chunk.
func (ToolOutputDeniedChunk) ChunkType() string { return "tool-output-denied" }

// ChunkType implements Chunk.
func (SourceURLChunk) ChunkType() string { return "source-url" }

// ChunkType implements Chunk.
func (SourceDocumentChunk) ChunkType() string { return "source-document" }

// ChunkType implements Chunk.
func (FileChunk) ChunkType() string { return "file" }

// ChunkType implements Chunk.
func (ReasoningFileChunk) ChunkType() string { return "reasoning-file" }

// ChunkType implements Chunk.
func (CustomChunk) ChunkType() string { return "custom" }

// ChunkType implements Chunk.
func (c DataChunk) ChunkType() string { return "data-" + c.Name }
