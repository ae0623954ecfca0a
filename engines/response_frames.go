package engines

import (
	"encoding/json"
	"fmt"
)

// ResponseMetadata is the messageMetadata of a response's start part. The browser
// deep-merges it into the UI message's metadata.
type ResponseMetadata struct {
	ResponseID string         `json:"response_id"`
	InputIDs   []string       `json:"input_ids"`
	Origin     ResponseOrigin `json:"origin"`
}

// ResponseEndMetadata is the messageMetadata of a response's final finish part: the
// outcome and the vendor's native reason, kept with the message in history.
type ResponseEndMetadata struct {
	Outcome      ResponseOutcome `json:"outcome"`
	NativeReason string          `json:"native_reason"`
}

// ResponseStartFrame opens a response's UI message: a start part whose messageId is the
// response id and whose messageMetadata carries response_id, input_ids and origin. Emit
// it again, unchanged or with the complete input_ids, to reopen the same message after
// an interaction segment or when another input joins the response.
func ResponseStartFrame(meta ResponseMetadata) Frame {
	if meta.InputIDs == nil {
		meta.InputIDs = []string{}
	}
	raw, _ := json.Marshal(meta) // strings and string slices always encode
	return MustFrame(StartChunk{MessageID: meta.ResponseID, MessageMetadata: raw})
}

// ResponseEndFrames closes a response's UI message for its ResponseEnded event: an error
// part first when the response failed, then a finish part whose finishReason reads the
// outcome (stop, error, interrupted) and whose messageMetadata carries outcome and
// native_reason.
func ResponseEndFrames(ended ResponseEnded) []Frame {
	meta, _ := json.Marshal(ResponseEndMetadata{Outcome: ended.Outcome, NativeReason: ended.NativeReason})
	var frames []Frame
	reason := FinishStop
	switch ended.Outcome {
	case OutcomeFailed:
		reason = FinishError
		text := "The Agent program ended the response with a failure"
		if ended.NativeReason != "" {
			text += " (" + ended.NativeReason + ")"
		}
		if ended.Error != nil && ended.Error.Message != "" {
			text = ended.Error.Message
		}
		frames = append(frames, MustFrame(ErrorChunk{ErrorText: text}))
	case OutcomeCancelled:
		reason = FinishInterrupted
	}
	return append(frames, MustFrame(FinishChunk{FinishReason: reason, MessageMetadata: meta}))
}

// InteractionRecord is the data of a data-interaction part: what the console shows for
// a pending interaction and how to answer it (POST .../interactions/{interaction_id}/answer).
type InteractionRecord struct {
	InteractionID string `json:"interaction_id"`
	ResponseID    string `json:"response_id"`
	// ApprovalID is the approvalId of the tool-approval-request part for a tool
	// approval; AstraBox uses the interaction id so the browser's approval maps directly.
	ApprovalID string              `json:"approval_id,omitempty"`
	Contract   InteractionContract `json:"contract"`
}

// ToolApprovalRequestFrame builds the tool-approval-request part for a tool-approval
// interaction; its approvalId is the interaction id. The tool's input parts must have
// been emitted before it.
func ToolApprovalRequestFrame(interactionID string, c InteractionContract) (Frame, error) {
	if c.Presentation != PresentationToolApproval || c.Tool == nil {
		return Frame{}, fmt.Errorf("tool approval request for %s: contract is not a tool approval", interactionID)
	}
	return NewFrame(ToolApprovalRequestChunk{ApprovalID: interactionID, ToolCallID: c.Tool.ToolCallID, Reason: c.Prompt})
}

// InteractionSegmentFrames returns the parts that close the browser's message segment
// when a response pauses on an interaction, in order: a tool-approval-request for a tool
// approval, a data-interaction part (id = interaction id) whose data is the interaction
// record, and a finish part with finishReason "tool-calls". Report InteractionOpened
// before them and StatusChanged(waiting) after; before any further part of the
// response, reopen the message with ResponseStartFrame under the same messageId.
func InteractionSegmentFrames(responseID, interactionID string, c InteractionContract) ([]Frame, error) {
	if err := ValidateInteractionContract(c); err != nil {
		return nil, fmt.Errorf("interaction %s: %w", interactionID, err)
	}
	var frames []Frame
	record := InteractionRecord{InteractionID: interactionID, ResponseID: responseID, Contract: c}
	if c.Presentation == PresentationToolApproval {
		f, err := ToolApprovalRequestFrame(interactionID, c)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
		record.ApprovalID = interactionID
	}
	data, err := json.Marshal(record)
	if err != nil {
		return nil, fmt.Errorf("interaction %s record: %w", interactionID, err)
	}
	frames = append(frames,
		MustFrame(DataChunk{Name: "interaction", ID: interactionID, Data: data}),
		MustFrame(FinishChunk{FinishReason: FinishToolCalls}),
	)
	return frames, nil
}

// ToolApprovalResponseFrame builds the tool-approval-response part that opens the
// continuation of a response after a tool approval was answered (approvalId is the
// interaction id). It is harmless in the tab that answered and tells every other
// reader of the stream how the approval went.
func ToolApprovalResponseFrame(interactionID string, approved bool, reason string) Frame {
	return MustFrame(ToolApprovalResponseChunk{ApprovalID: interactionID, Approved: approved, Reason: reason})
}
