package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/store"
)

// recordResponse records a response row and its parts as the Relay will.
func (f *fixture) recordResponse(r *relay, responseID string, inputIDs []string, frames []engines.Frame, outcome string) {
	f.t.Helper()
	if inputIDs == nil {
		inputIDs = []string{}
	}
	ids, _ := json.Marshal(inputIDs)
	start := r.append(responseID, frames[0])
	f.exec(`INSERT INTO responses (session_id, response_id, origin, input_ids, started_seq, started_at) VALUES ($1, $2, 'input', $3, $4, clock_timestamp())`,
		r.sessionID, responseID, string(ids), start)
	end := start
	if len(frames) > 1 {
		end = r.append(responseID, frames[1:]...)
	}
	if outcome != "" {
		f.exec(`UPDATE responses SET outcome = $3, native_reason = 'end_turn', ended_seq = $4, ended_at = clock_timestamp() WHERE session_id = $1 AND response_id = $2`,
			r.sessionID, responseID, outcome, end)
	}
}

// toolResponse calls a tool, then answers in text.
func toolResponse(responseID string, outcome engines.ResponseOutcome) []engines.Frame {
	preview := engines.WithPartID(engines.MustFrame(engines.TextStartChunk{ID: responseID + "-preview"}))
	var retractions engines.Retractions
	frames := []engines.Frame{
		engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: responseID, Origin: engines.OriginInput}),
		engines.MustFrame(engines.StartStepChunk{}),
		preview,
		engines.MustFrame(engines.TextDeltaChunk{ID: responseID + "-preview", Delta: "thinking out loud"}),
		engines.MustFrame(engines.TextEndChunk{ID: responseID + "-preview"}),
		retractions.Retract(responseID + "-preview"),
		engines.MustFrame(engines.ReasoningStartChunk{ID: responseID + "-r"}),
		engines.MustFrame(engines.ReasoningDeltaChunk{ID: responseID + "-r", Delta: "look at files"}),
		engines.MustFrame(engines.ReasoningEndChunk{ID: responseID + "-r"}),
		engines.PublicFrame(engines.MustFrame(engines.ToolInputStartChunk{ToolCallID: responseID + "-c", ToolName: "Bash"})),
		engines.MustFrame(engines.ToolInputDeltaChunk{ToolCallID: responseID + "-c", InputTextDelta: `{"cmd":`}),
		engines.MustFrame(engines.ToolInputDeltaChunk{ToolCallID: responseID + "-c", InputTextDelta: `"ls"}`}),
		engines.PublicFrame(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: responseID + "-c", ToolName: "Bash", Input: json.RawMessage(`{"cmd":"ls"}`)})),
		engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: responseID + "-c", Output: json.RawMessage(`"a.go"`)}),
		engines.MustFrame(engines.FinishStepChunk{}),
		engines.MustFrame(engines.StartStepChunk{}),
	}
	fc, _ := engines.FileChangesFrame(responseID+"-c", []engines.FileChange{{Path: "a.go", Kind: "update"}})
	frames = append(frames, fc,
		engines.MustFrame(engines.TextStartChunk{ID: responseID + "-t"}),
		engines.MustFrame(engines.TextDeltaChunk{ID: responseID + "-t", Delta: "Done."}),
		engines.MustFrame(engines.TextEndChunk{ID: responseID + "-t"}),
		engines.MustFrame(engines.FinishStepChunk{}))
	return append(frames, engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: responseID, Outcome: outcome, NativeReason: "end_turn"})...)
}

func TestMessagesMatchWhatTheBrowserAssembles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	var in inputReceipt
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "list files", "client_message_id": "u-1"}).ok(t).into(t, &in)
	frames := toolResponse("r-1", engines.OutcomeCompleted)
	f.recordResponse(r, "r-1", []string{in.InputID}, frames, "completed")

	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 2)
	user, asst := page.Messages[0], page.Messages[1]
	assert.Equal(t, "u-1", user.ID, "the client's message id")
	assert.Equal(t, "user", user.Role)
	assert.Equal(t, "list files", user.Parts[0]["text"])
	assert.Equal(t, "r-1", asst.ID)
	assert.Equal(t, "completed", asst.Metadata["outcome"])
	require.NotNil(t, page.OutputSeq)
	assert.Nil(t, page.ReplaySeq)

	// The browser's own assembly of the same recorded parts, retracted preview omitted.
	report := uicheck.RequireValidChunks(t, engines.OmitRetracted(frames))
	require.Len(t, report.Messages, 1)
	want, err := json.Marshal(report.Messages[0].Parts)
	require.NoError(t, err)
	got, err := json.Marshal(asst.Parts)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.NotContains(t, string(got), "thinking out loud")
}

func TestMessagesPageBackwardsAndShowAnActiveResponse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	for i, rid := range []string{"r-1", "r-2", "r-3"} {
		var in inputReceipt
		f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "q" + itoa(int64(i))}).ok(t).into(t, &in)
		frames := textResponse(rid, "answer "+itoa(int64(i)), engines.OutcomeCompleted)
		if rid == "r-3" {
			f.recordResponse(r, rid, []string{in.InputID}, frames[:4], "")
			continue
		}
		f.recordResponse(r, rid, []string{in.InputID}, frames, "completed")
	}
	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages?limit=4", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 4)
	assert.Equal(t, "r-3", page.Messages[3].ID)
	assert.Equal(t, true, page.Messages[3].Metadata["open"])
	assert.Equal(t, "answer ", page.Messages[3].Parts[1]["text"], "the parts so far")
	require.NotNil(t, page.OutputSeq)
	var outputSeq int64
	require.NoError(t, f.db.QueryRow(f.ctx, `SELECT output_seq FROM session_outputs WHERE session_id = $1`, id).Scan(&outputSeq))
	assert.Equal(t, outputSeq, *page.OutputSeq)
	require.NotNil(t, page.ReplaySeq)
	assert.True(t, page.HasMore)
	require.NotNil(t, page.Before)

	var older messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages?limit=4&before="+*page.Before, f.member, nil).ok(t).into(t, &older)
	require.Len(t, older.Messages, 2)
	assert.Equal(t, "r-1", older.Messages[1].ID)
	assert.False(t, older.HasMore)
	assert.Nil(t, older.Before)
	assert.Nil(t, older.OutputSeq)

	for _, q := range []string{"?before=***", "?before=eA", "?limit=0", "?limit=x", "?after=1"} {
		f.call("GET", "/api/v1/sessions/"+id+"/messages"+q, f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest)
	}
}

func TestHistoryBlocksFoldWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	f.recordResponse(r, "r-ok", nil, toolResponse("r-ok", engines.OutcomeCompleted), "completed")
	f.recordResponse(r, "r-failed", nil, toolResponse("r-failed", engines.OutcomeFailed), "failed")
	f.recordResponse(r, "r-plain", nil, textResponse("r-plain", "just text", engines.OutcomeCompleted), "completed")

	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 3)
	ok, failed, plain := page.Messages[0], page.Messages[1], page.Messages[2]

	// A completed response folds everything before the text after its last tool call.
	require.Equal(t, "data-process-block", ok.Parts[0]["type"])
	assert.Equal(t, "text", ok.Parts[len(ok.Parts)-1]["type"])
	assert.Equal(t, "Done.", ok.Parts[len(ok.Parts)-1]["text"])
	for _, p := range ok.Parts[1:] {
		assert.NotEqual(t, "dynamic-tool", p["type"])
	}
	block := ok.Parts[0]["data"].(map[string]any)
	assert.Equal(t, true, block["response_completed"])

	// A failed response keeps its data parts visible and says it did not complete.
	require.Equal(t, "data-process-block", failed.Parts[0]["type"])
	assert.Equal(t, false, failed.Parts[0]["data"].(map[string]any)["response_completed"])
	assert.Equal(t, "failed", failed.Metadata["outcome"])
	assert.Contains(t, failed.Metadata["error_text"], "end_turn", "the failure notice stays with the message")
	var visibleTypes []any
	for _, p := range failed.Parts[1:] {
		visibleTypes = append(visibleTypes, p["type"])
	}
	assert.Equal(t, []any{"data-file-changes"}, visibleTypes)
	// Text only, no tool call: nothing to fold.
	assert.NotEqual(t, "data-process-block", plain.Parts[0]["type"])

	// Opening the whole-response header restores its body text and process groups;
	// opening a group shows its tool and reasoning entries. Nothing is discarded.
	open := func(b map[string]any) []map[string]any {
		var opened struct {
			Parts []map[string]any `json:"parts"`
		}
		f.call("GET", "/api/v1/sessions/"+id+"/history-blocks/"+b["block_id"].(string)+"?cursor="+b["cursor"].(string), f.member, nil).ok(t).into(t, &opened)
		return opened.Parts
	}
	assert.Equal(t, "response", block["kind"])
	work := open(block)
	require.Len(t, work, 1)
	require.Equal(t, "data-process-block", work[0]["type"])
	group := work[0]["data"].(map[string]any)
	assert.Equal(t, "group", group["kind"])
	entries := open(group)
	assert.Len(t, entries, int(group["part_count"].(float64)))
	var entryTypes []any
	for _, p := range entries {
		entryTypes = append(entryTypes, p["type"])
	}
	assert.Equal(t, []any{"step-start", "reasoning", "dynamic-tool"}, entryTypes)
	var full messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &full)
	assert.Equal(t, len(full.Messages[0].Parts), len(entries)+len(ok.Parts)-1, "folding discards nothing")
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks/"+block["block_id"].(string)+"?cursor=bad", f.member, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "cursor")
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks/r-plain.work?cursor="+blockCursor("r-plain"), f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
}

func TestHistoryBlocksGroupWorkOfOpenResponsesButKeepApprovalsVisible(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	frames := toolResponse("r-open", engines.OutcomeCompleted)
	f.recordResponse(r, "r-open", nil, frames[:14], "")
	seg, err := engines.InteractionSegmentFrames("r-wait", "int-1", engines.ToolApprovalContract(engines.NativeRequest{Type: "permission", ID: "n"}, "c-9", "Bash", json.RawMessage(`{}`)))
	require.NoError(t, err)
	waiting := append([]engines.Frame{
		engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: "r-wait", Origin: engines.OriginInput}),
		engines.PublicFrame(engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "c-9", ToolName: "Bash", Input: json.RawMessage(`{}`)})),
	}, seg...)
	f.recordResponse(r, "r-wait", nil, waiting, "")

	var page messagePage
	f.call("GET", "/api/v1/sessions/"+id+"/history-blocks", f.member, nil).ok(t).into(t, &page)
	require.Len(t, page.Messages, 2)
	open := page.Messages[0]
	var headers []any
	for _, p := range open.Parts {
		if p["type"] == "data-process-block" {
			headers = append(headers, p["data"].(map[string]any)["kind"])
		}
	}
	assert.Equal(t, []any{"group"}, headers, "an open response is not folded whole, its work is grouped")
	for _, p := range page.Messages[1].Parts {
		assert.NotEqual(t, "data-process-block", p["type"], "a tool awaiting approval stays answerable")
	}
}

// TestAMessagesPageAgreesWithItsOutputPosition: a page is read while the response it
// shows keeps streaming, and the output position it gives (where a client follows the
// stream on) is the one its parts were read at: the text holds exactly the deltas up
// to that position, none a client would then read again and none it would miss.
func TestAMessagesPageAgreesWithItsOutputPosition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	r := f.relay(id)
	var in inputReceipt
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "stream"}).ok(t).into(t, &in)
	f.recordResponse(r, "r-1", []string{in.InputID}, []engines.Frame{
		engines.ResponseStartFrame(engines.ResponseMetadata{ResponseID: "r-1", Origin: engines.OriginInput}),
		engines.MustFrame(engines.TextStartChunk{ID: "t"}),
	}, "")
	textStarted := r.append("r-1", engines.MustFrame(engines.TextDeltaChunk{ID: "t", Delta: "x"})) - 1

	const deltas = 200
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		raw, err := engines.MustFrame(engines.TextDeltaChunk{ID: "t", Delta: "x"}).MarshalJSON()
		if err != nil {
			t.Error(err)
			return
		}
		responseID := "r-1"
		for range deltas {
			parts := []store.NewPart{{Frame: raw, ResponseID: &responseID}}
			if _, err := f.st.AppendParts(f.ctx, store.AppendRequest{SessionID: id, LeaseGeneration: r.lease, Parts: parts}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for pages := 0; ; pages++ {
		select {
		case <-appended:
			require.Positive(t, pages)
			return
		default:
		}
		var page messagePage
		f.call("GET", "/api/v1/sessions/"+id+"/messages", f.member, nil).ok(t).into(t, &page)
		require.NotNil(t, page.OutputSeq)
		asst := page.Messages[len(page.Messages)-1]
		var text string
		for _, p := range asst.Parts {
			if p["type"] == "text" {
				text += p["text"].(string)
			}
		}
		require.Equal(t, *page.OutputSeq-textStarted, int64(len(text)), "page %d: the deltas up to the position it gives", pages)
	}
}
