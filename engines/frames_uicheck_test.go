package engines_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/uicheck"
)

// mustFrame returns a function that unwraps a (Frame, error) result in test t.
func mustFrame(t *testing.T) func(engines.Frame, error) engines.Frame {
	return func(f engines.Frame, err error) engines.Frame {
		t.Helper()
		require.NoError(t, err)
		return f
	}
}

func metadataOf(t *testing.T, m uicheck.UIMessage) map[string]any {
	t.Helper()
	var meta map[string]any
	require.NoError(t, json.Unmarshal(m.Metadata, &meta))
	return meta
}

// TestEveryTypedChunkIsAcceptedByTheAIClient encodes one of each typed chunk and checks
// the whole stream with the ai package's own schema and message assembly.
func TestEveryTypedChunkIsAcceptedByTheAIClient(t *testing.T) {
	t.Parallel()
	must := mustFrame(t)
	yes := true
	pm := engines.ProviderMetadata{"vendor": {"k": "v"}}
	chunks := []engines.Chunk{
		engines.StartChunk{MessageID: "m-every"},
		engines.StartStepChunk{},
		engines.ReasoningStartChunk{ID: "r1", ProviderMetadata: pm},
		engines.ReasoningDeltaChunk{ID: "r1", Delta: "thinking"},
		engines.ReasoningEndChunk{ID: "r1"},
		engines.TextStartChunk{ID: "t1"},
		engines.TextDeltaChunk{ID: "t1", Delta: "hello"},
		engines.TextEndChunk{ID: "t1"},
		engines.ToolInputStartChunk{ToolCallID: "c1", ToolName: "Bash", Title: "Run"},
		engines.ToolInputDeltaChunk{ToolCallID: "c1", InputTextDelta: `{"command":`},
		engines.ToolInputAvailableChunk{ToolCallID: "c1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		engines.ToolOutputAvailableChunk{ToolCallID: "c1", Output: json.RawMessage(`"a\nb"`), Preliminary: &yes},
		engines.ToolOutputAvailableChunk{ToolCallID: "c1"}, // nil output must encode as null
		engines.ToolInputStartChunk{ToolCallID: "c2", ToolName: "Write"},
		engines.ToolInputErrorChunk{ToolCallID: "c2", ToolName: "Write", ErrorText: "bad input"},
		engines.ToolInputAvailableChunk{ToolCallID: "c3", ToolName: "Edit"},
		engines.ToolOutputErrorChunk{ToolCallID: "c3", ErrorText: "failed"},
		engines.ToolInputAvailableChunk{ToolCallID: "c4", ToolName: "Bash", Input: json.RawMessage(`{}`)},
		engines.ToolApprovalRequestChunk{ApprovalID: "a4", ToolCallID: "c4", Reason: "needs approval"},
		engines.ToolApprovalResponseChunk{ApprovalID: "a4", Approved: false, Reason: "no"},
		engines.ToolOutputDeniedChunk{ToolCallID: "c4"},
		engines.SourceURLChunk{SourceID: "s1", URL: "https://example.com", Title: "Example"},
		engines.SourceDocumentChunk{SourceID: "s2", MediaType: "text/plain", Title: "Notes"},
		engines.FileChunk{URL: "data:text/plain;base64,aGk=", MediaType: "text/plain"},
		engines.ReasoningFileChunk{URL: "data:text/plain;base64,aGk=", MediaType: "text/plain"},
		engines.CustomChunk{Kind: "vendor.thing"},
		engines.DataChunk{Name: "note", ID: "n1"},
		engines.DataChunk{Name: "note", ID: "n1", Data: json.RawMessage(`{"v":2}`)},
		engines.MessageMetadataChunk{},
		engines.FinishStepChunk{},
		engines.StartStepChunk{},
		engines.ResetStepChunk{},
		engines.AbortChunk{Reason: "test"},
		engines.ErrorChunk{ErrorText: "boom"},
		engines.FinishChunk{FinishReason: engines.FinishError},
	}
	frames := make([]engines.Frame, len(chunks))
	for i, c := range chunks {
		frames[i] = must(engines.NewFrame(c))
		frames[i] = engines.PublicFrame(frames[i])
	}
	r := uicheck.RequireValidChunks(t, frames)
	require.Len(t, r.Messages, 1)
	m := r.Messages[0]
	require.Equal(t, "m-every", m.ID)
	require.Equal(t, []string{"boom"}, r.ErrorChunks)
	for _, p := range m.Parts {
		require.False(t, strings.HasPrefix(p["type"].(string), "tool-"), "typed tool part %v: PublicFrame must make tool parts dynamic", p)
	}
	notes := m.PartsOfType("data-note")
	require.Len(t, notes, 1, "same type and id must update in place")
	require.Equal(t, map[string]any{"v": float64(2)}, notes[0]["data"])
}

// TestResponseWithInteractionSegments builds a response the way an adapter reports one:
// start, output, a tool approval segment, a continuation under the same messageId, a
// decision segment, a retracted preview, file changes, child runs, and a failed end.
func TestResponseWithInteractionSegments(t *testing.T) {
	t.Parallel()
	must := mustFrame(t)
	const resp = "resp-seg"
	meta := engines.ResponseMetadata{ResponseID: resp, InputIDs: []string{"in-1"}, Origin: engines.OriginInput}
	native := engines.NativeRequest{Type: "can_use_tool", ID: "req-1", Payload: json.RawMessage(`{"tool_name":"Bash"}`)}
	approval := engines.ToolApprovalContract(native, "call-1", "Bash", json.RawMessage(`{"command":"touch x"}`))
	decision := engines.DecisionContract(engines.NativeRequest{Type: "extension_ui_request", ID: "q-1"}, "Proceed?",
		engines.DecisionOption{ID: "yes", Label: "Yes"}, engines.DecisionOption{ID: "no", Label: "No"})
	approvalSeg, err := engines.InteractionSegmentFrames(resp, "int-1", approval)
	require.NoError(t, err)
	decisionSeg, err := engines.InteractionSegmentFrames(resp, "int-2", decision)
	require.NoError(t, err)
	form := engines.FormContract(engines.NativeRequest{Type: "mcpServer/elicitation/request", ID: "e-1"}, "Details",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`))
	formSeg, err := engines.InteractionSegmentFrames(resp, "int-3", form)
	require.NoError(t, err)
	var retractions engines.Retractions
	fileChanges := must(engines.FileChangesFrame("call-2", []engines.FileChange{
		{Path: "a.txt", Kind: "add", Diff: nil},
		{Path: "b.txt", Kind: "update", Diff: &engines.FileDiff{Format: engines.DiffUnifiedPatch, Patch: "@@ -1 +1 @@\n-a\n+b\n"}},
	}))
	child := must(engines.SubagentFrame("sess-1", engines.ChildRun{NativeRef: "task-9", Status: "running", Title: "Explore"}))
	childMsg := must(engines.SubagentMessageFrame("sess-1", "task-9", engines.ChildRunMessage{
		MessageID: "cm-1", Role: "assistant", Parts: json.RawMessage(`[{"type":"text","text":"found it"}]`)}))

	var frames []engines.Frame
	add := func(fs ...engines.Frame) {
		for _, f := range fs {
			frames = append(frames, engines.PublicFrame(f))
		}
	}
	add(engines.ResponseStartFrame(meta), engines.MustFrame(engines.StartStepChunk{}))
	add(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: "call-1", ToolName: "Bash"}),
		engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "call-1", ToolName: "Bash", Input: json.RawMessage(`{"command":"touch x"}`)}))
	add(approvalSeg...)
	add(engines.ResponseStartFrame(meta),
		engines.ToolApprovalResponseFrame("int-1", true, ""),
		engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: "call-1", Output: json.RawMessage(`""`)}))
	add(engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: "preview-1"})),
		engines.MustFrame(engines.TextDeltaChunk{ID: "preview-1", Delta: "draft"}),
		engines.MustFrame(engines.TextEndChunk{ID: "preview-1"}),
		retractions.Retract("preview-1"))
	add(decisionSeg...)
	add(engines.ResponseStartFrame(meta))
	add(formSeg...)
	add(engines.ResponseStartFrame(meta), fileChanges, child, childMsg, engines.ResumeCursorFrame(42),
		engines.MustFrame(engines.TextStartChunk{ID: "final"}),
		engines.MustFrame(engines.TextDeltaChunk{ID: "final", Delta: "done"}),
		engines.MustFrame(engines.TextEndChunk{ID: "final"}),
		engines.MustFrame(engines.FinishStepChunk{}))
	add(engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: resp, Outcome: engines.OutcomeFailed,
		NativeReason: "api_error", Error: &engines.ResponseError{Message: "API Error: 400"}})...)

	// Frames are relayed from the stored event log: validate what a reader decodes.
	stored := make([]engines.Frame, len(frames))
	for i, f := range frames {
		data, err := engines.MarshalEvent(engines.NewResponseOutput(engines.RuntimeCursor{Generation: "g", Position: json.RawMessage(fmt.Sprint(i))}, resp, f))
		require.NoError(t, err)
		ev, err := engines.UnmarshalEvent(data)
		require.NoError(t, err)
		stored[i] = ev.(engines.ResponseOutput).Frame
		require.True(t, stored[i].Equal(f), "frame %d changed through storage: %s vs %s", i, stored[i], f)
	}
	r := uicheck.RequireValidChunks(t, stored)
	require.Len(t, r.Messages, 1, "every segment must continue the same message")
	m := r.Messages[0]
	require.Equal(t, resp, m.ID)
	md := metadataOf(t, m)
	require.Equal(t, resp, md["response_id"])
	require.Equal(t, []any{"in-1"}, md["input_ids"])
	require.Equal(t, "input", md["origin"])
	require.Equal(t, []any{"preview-1"}, md["retracted_part_ids"])
	require.Equal(t, "failed", md["outcome"])
	require.Equal(t, "api_error", md["native_reason"])
	require.Equal(t, []string{"API Error: 400"}, r.ErrorChunks)

	tools := m.PartsOfType("dynamic-tool")
	require.Len(t, tools, 1)
	require.Equal(t, "output-available", tools[0]["state"])
	require.Equal(t, map[string]any{"id": "int-1", "approved": true}, tools[0]["approval"])
	interactions := m.PartsOfType("data-interaction")
	require.Len(t, interactions, 3)
	require.Equal(t, "int-1", interactions[0]["data"].(map[string]any)["approval_id"])
	require.Len(t, m.PartsOfType("data-file-changes"), 1)
	require.Len(t, m.PartsOfType("data-subagent"), 2)
	require.Empty(t, m.PartsOfType("data-resume-cursor"), "resume cursors are transient")

	// Presentation omits the withdrawn preview; the log keeps it.
	shown := uicheck.RequireValidChunks(t, engines.OmitRetracted(frames))
	var texts []string
	for _, p := range shown.Messages[0].PartsOfType("text") {
		texts = append(texts, p["text"].(string))
	}
	require.Equal(t, []string{"done"}, texts)
}

func TestResponseEndFramesPerOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		outcome engines.ResponseOutcome
		reason  string
	}{
		{engines.OutcomeCompleted, "stop"},
		{engines.OutcomeCancelled, "interrupted"},
		{engines.OutcomeFailed, "error"},
	} {
		meta := engines.ResponseMetadata{ResponseID: "resp-" + string(tc.outcome), Origin: engines.OriginEngine}
		end := engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: meta.ResponseID, Outcome: tc.outcome, NativeReason: "native"})
		last := end[len(end)-1]
		require.Equal(t, "finish", last.Type())
		require.Equal(t, tc.reason, last.StringField("finishReason"))
		if tc.outcome == engines.OutcomeFailed {
			require.Equal(t, "error", end[0].Type(), "a failed response sends an error part before its finish")
		} else {
			require.Len(t, end, 1)
		}
		frames := append([]engines.Frame{engines.ResponseStartFrame(meta)}, end...)
		r := uicheck.RequireValidChunks(t, frames)
		require.Len(t, r.Messages, 1)
		require.Equal(t, string(tc.outcome), metadataOf(t, r.Messages[0])["outcome"])
		require.Equal(t, []any{}, metadataOf(t, r.Messages[0])["input_ids"], "input_ids is present even when empty")
	}
}

func TestInputFailedFrameOutsideAResponse(t *testing.T) {
	t.Parallel()
	f := engines.InputFailedFrame("in-9", "CONVERSATION_ENDED", "the Session was archived")
	r := uicheck.RequireValidChunks(t, []engines.Frame{f, engines.ResumeCursorFrame(7)})
	require.Len(t, r.Messages, 1)
	parts := r.Messages[0].PartsOfType("data-input-failed")
	require.Len(t, parts, 1)
	require.Equal(t, "in-9", parts[0]["id"])
	require.Equal(t, "CONVERSATION_ENDED", parts[0]["data"].(map[string]any)["code"])
}
