package acp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/enginetest"
)

// syntheticRecording builds a journal from lines as the box would hold them.
func syntheticRecording(kind string, lines ...string) recording {
	rec := recording{kind: kind, meta: recordingMeta{Process: kind + "-new-0a1b2c3d", SessionID: "sess-1"}}
	for i, l := range lines {
		rec.journal = append(rec.journal, engines.OutputLine{Offset: int64(i + 1), Stream: engines.Stdout, Data: []byte(l)})
	}
	return rec
}

const (
	sentPrompt      = `{"astrabox_sent":{"jsonrpc":"2.0","id":"prompt:in-1","method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}}`
	toolCall        = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"Terminal","kind":"execute","status":"pending","rawInput":{"command":"touch x"}}}}`
	permission      = `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"sess-1","toolCall":{"toolCallId":"call-1","title":"Terminal"},"options":[{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"always","name":"Always","kind":"allow_always"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}`
	sentCancel      = `{"astrabox_sent":{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}}`
	sentCancelled   = `{"astrabox_sent":{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}}`
	replyCancelled  = `{"jsonrpc":"2.0","id":"prompt:in-1","result":{"stopReason":"cancelled"}}`
	withdrawRequest = `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`
	fsRequest       = `{"jsonrpc":"2.0","id":8,"method":"fs/read_text_file","params":{"sessionId":"sess-1","path":"/etc/hosts"}}`
)

// TestInterruptAnswersOpenPermissionsCancelled checks the cancel of a turn waiting on a
// permission: the client sends session/cancel and answers the open request cancelled
// (Gemini CLI waits for that answer); the request closes withdrawn when the answer is in
// the journal, and the response ends cancelled.
func TestInterruptAnswersOpenPermissionsCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	waiting, proc := replayClient(t, syntheticRecording(acp.KindGemini, sentPrompt, toolCall, permission))
	st, err := waiting.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.PendingInteractions, 1)
	require.Equal(t, engines.StatusWaiting, st.Status)
	opened := st.PendingInteractions[0]
	require.Equal(t, "resp_sess-1:0a1b2c3d:1:call-1", opened.InteractionID)
	require.Len(t, opened.Contract.Options, 3, "the program's own options are offered")

	require.NoError(t, waiting.Interrupt(ctx, false))
	writes := proc.written()
	require.Len(t, writes, 2)
	require.Contains(t, writes[0], `"method":"session/cancel"`)
	require.Contains(t, writes[1], `"id":7`)
	require.Contains(t, writes[1], `"outcome":"cancelled"`)

	done, _ := replayClient(t, syntheticRecording(acp.KindGemini, sentPrompt, toolCall, permission, sentCancel, sentCancelled, replyCancelled))
	var closed []engines.InteractionClosed
	var ended []engines.ResponseEnded
	for _, ev := range readAll(t, done) {
		switch e := ev.(type) {
		case engines.InteractionClosed:
			closed = append(closed, e)
		case engines.ResponseEnded:
			ended = append(ended, e)
		}
	}
	require.Equal(t, []engines.InteractionClosed{{Cursor: closed[0].Cursor, InteractionID: opened.InteractionID, Reason: engines.ClosureWithdrawn}}, closed)
	require.Len(t, ended, 1)
	require.Equal(t, engines.OutcomeCancelled, ended[0].Outcome)
	require.Equal(t, "cancelled", ended[0].NativeReason)
	require.ErrorIs(t, done.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}),
		engines.ErrInteractionNotOpen, "a withdrawn request takes no answer")
}

// TestAnswersChooseOptionsByKind answers by the options' kinds, never their ids, and
// takes a program option id as it is.
func TestAnswersChooseOptionsByKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for decision, option := range map[string]string{engines.DecisionApprove: "yes", engines.DecisionDeny: "no", "always": "always"} {
		c, proc := replayClient(t, syntheticRecording(acp.KindClaude, sentPrompt, toolCall, permission))
		require.NoError(t, c.Answer(ctx, "resp_sess-1:0a1b2c3d:1:call-1", engines.InteractionAnswer{Decision: decision}))
		writes := proc.written()
		require.Len(t, writes, 1)
		require.True(t, strings.HasPrefix(writes[0], "answer:resp_sess-1:0a1b2c3d:1:call-1 "), writes[0])
		require.Contains(t, writes[0], `"optionId":"`+option+`"`, decision)
	}
}

// TestProgramWithdrawsAndUndeclaredRequests closes a request the program withdraws
// ($/cancel_request) and declines fs/* requests, which initialize declared unserved.
func TestProgramWithdrawsAndUndeclaredRequests(t *testing.T) {
	t.Parallel()
	c, proc := replayClient(t, syntheticRecording(acp.KindCodex, sentPrompt, toolCall, permission, withdrawRequest, fsRequest))
	var closed []engines.InteractionClosed
	var diags []string
	for _, ev := range readAll(t, c) {
		switch e := ev.(type) {
		case engines.InteractionClosed:
			closed = append(closed, e)
		case engines.RuntimeDiagnostic:
			diags = append(diags, e.EventType)
		}
	}
	require.Len(t, closed, 1)
	require.Equal(t, engines.ClosureWithdrawn, closed[0].Reason)
	require.Contains(t, diags, "fs/read_text_file")
	writes := proc.written()
	require.Len(t, writes, 1)
	require.True(t, strings.HasPrefix(writes[0], "decline:8 "), writes[0])
	require.Contains(t, writes[0], `"code":-32601`)
}

// TestSessionLogMatchesUserRecords finds prompts in transcripts by their text: only
// user records count (not a tool's result under the user's role, nor an assistant
// line quoting the text), only after the lines the log held when the prompt was sent,
// and a record another prompt claimed is skipped.
func TestSessionLogMatchesUserRecords(t *testing.T) {
	t.Parallel()
	const path = "/home/.claude/projects/-workspace/s1.jsonl"
	log := strings.Join([]string{
		`{"type":"user","message":{"role":"user","content":"say \"hi\""}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"say \"hi\""}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"say \"hi\""}]}}`,
		`{"type":"user","message":{"role":"user","content":"say \"hi\""}}`,
		`{"timestamp":"x","type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"codex"}]}}}`,
		`{"type":"agent/inbox/spliced","seq":3,"data":{"target":"next-turn","start":0,"inserted":[{"content":[{"type":"text","text":"dsh"}],"source":{"kind":"user"},"role":"user","id":"m1"}]}}`,
		`{"type":"agent/inbox/spliced","seq":5,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}`,
		`{"type":"user/message","seq":7,"data":{"content":[{"type":"text","text":"dsh"}],"source":{"kind":"user"},"role":"user","id":"m1"}}`,
		`{"type":"agent/inbox/spliced","seq":9,"data":{"inserted":[{"content":[{"type":"text","text":"dsh plugin"}],"source":{"kind":"plugin"},"role":"user"}]}}`,
		`{"type":"user","message":{"role":"user","content":"half a line`,
	}, "\n")
	box := enginetest.NewReplayBox("log", nil, map[string][]byte{path: []byte(log)})
	for name, tc := range map[string]struct {
		text    string
		from    int
		claimed []int
		want    int
	}{
		"first user record":          {`say "hi"`, 0, nil, 0},
		"after the sent-time lines":  {`say "hi"`, 1, nil, 3},
		"claimed by an earlier one":  {`say "hi"`, 0, []int{0}, 3},
		"Codex's UserMessage item":   {"codex", 0, nil, 4},
		"DSH's spliced user message": {"dsh", 0, nil, 5},
		"not DSH's user/message":     {"dsh", 0, []int{5}, -1},
		"not a plugin's message":     {"dsh plugin", 0, nil, -1},
		"an incomplete line is not":  {"half a line", 0, nil, -1},
		"not there yet":              {"other", 0, nil, -1},
	} {
		line, ok := acp.FindInSessionLog(box, path, tc.text, tc.from, tc.claimed)
		require.Equal(t, tc.want >= 0, ok, name)
		if ok {
			require.Equal(t, tc.want, line, name)
		}
	}
}

// TestGeminiModeUpdateTextIsQuiet: Gemini CLI reports a mode change as agent text
// "[MODE_UPDATE] <mode>"; it stays out of the stream, as current_mode_update does,
// while the turn's own text is relayed.
func TestGeminiModeUpdateTextIsQuiet(t *testing.T) {
	t.Parallel()
	modeText := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"[MODE_UPDATE] autoEdit"}}}}`
	reply := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}`
	done := `{"jsonrpc":"2.0","id":"prompt:in-1","result":{"stopReason":"end_turn"}}`
	c, _ := replayClient(t, syntheticRecording(acp.KindGemini, modeText, sentPrompt, modeText, reply, done))
	var text strings.Builder
	for _, ev := range readAll(t, c) {
		switch e := ev.(type) {
		case engines.ResponseOutput:
			if e.Frame.Type() == "text-delta" {
				text.WriteString(e.Frame.StringField("delta"))
			}
		case engines.RuntimeDiagnostic:
			require.NotContains(t, string(e.Raw), "MODE_UPDATE", "not even a diagnostic")
		}
	}
	require.Contains(t, text.String(), "hello")
	require.NotContains(t, text.String(), "MODE_UPDATE")
}

// TestPromptAnsweredBeforeAnyOutput gives a prompt answered before the program sent
// anything for it (DeepSeek Harness sends a cancelled turn's text after the reply) its
// own response, started and ended by the reply, and the next prompt its own.
func TestPromptAnsweredBeforeAnyOutput(t *testing.T) {
	t.Parallel()
	const (
		sentSecond = `{"astrabox_sent":{"jsonrpc":"2.0","id":"prompt:in-2","method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"next"}]}}}`
		lateText   = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"partial"}}}}`
		replyEnd   = `{"jsonrpc":"2.0","id":"prompt:in-2","result":{"stopReason":"end_turn"}}`
	)
	c, _ := replayClient(t, syntheticRecording(acp.KindDeepSeekHarness, sentPrompt, sentCancel, replyCancelled, lateText, sentSecond, replyEnd))
	var started []engines.ResponseStarted
	var ended []engines.ResponseEnded
	var diags []string
	for _, ev := range readAll(t, c) {
		switch e := ev.(type) {
		case engines.ResponseStarted:
			started = append(started, e)
		case engines.ResponseEnded:
			ended = append(ended, e)
		case engines.RuntimeDiagnostic:
			diags = append(diags, e.EventType)
		}
	}
	require.Len(t, started, 2)
	require.Equal(t, []string{"in-1"}, started[0].InputIDs)
	require.Equal(t, []string{"in-2"}, started[1].InputIDs)
	require.Len(t, ended, 2)
	require.Equal(t, started[0].ResponseID, ended[0].ResponseID)
	require.Equal(t, engines.OutcomeCancelled, ended[0].Outcome)
	require.Equal(t, engines.OutcomeCompleted, ended[1].Outcome)
	require.NotContains(t, diags, "reply_outside_response")
}
