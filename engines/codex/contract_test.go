package codex_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/uicheck"
)

func TestAdapterContract(t *testing.T) {
	t.Parallel()
	enginetest.RunAdapterContract(t, codex.NewAdapter(codex.Config{}))
}

func TestRegistersInARegistry(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register(codex.EngineKind, codex.NewAdapter(codex.Config{})))
	require.Error(t, reg.Register(codex.EngineKind, codex.NewAdapter(codex.Config{})), "a second Codex adapter is refused")
	caps := codex.NewAdapter(codex.Config{}).Capabilities()
	require.Equal(t, []string{"untrusted", "on-request", "never"}, caps.PermissionModes)
	require.Equal(t, "CODEX_HOME", caps.Workload.ConfigDirEnv)
	require.True(t, caps.RequiresProcessSessions)
	// Only what the adapter writes into the box is declared (live_agentconfig_test.go).
	require.Equal(t, []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP}, caps.Extensions.MCPTransports)
	require.Equal(t, []string{"skills"}, caps.Extensions.Skills.Directories)
	require.Empty(t, caps.Extensions.NativePackageKinds)
	require.Equal(t, "AGENTS.md", caps.Extensions.InstructionsFile)
}

// TestRuntimeClientContract runs the structural suite and the connected checks over a
// client replaying a native recording.
func TestRuntimeClientContract(t *testing.T) {
	t.Parallel()
	caps := codex.NewAdapter(codex.Config{}).Capabilities()
	enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*codex.Client](),
		enginetest.WithCapabilities(caps),
		enginetest.WithConnectedClient(func(tb testing.TB) engines.RuntimeClient {
			c, _ := replayClient(tb, loadRecording(tb, "plain_text"))
			return c
		}))
}

// TestCursorDeterminismOnRecordings reads every recording again from every cursor.
func TestCursorDeterminismOnRecordings(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, name))
			recording := readAll(t, c)
			enginetest.CheckCursorDeterminism(t, recording, c.Events, 0)
			enginetest.CheckClientCursorDeterminism(t, c, len(recording), 0)
		})
	}
}

// TestFramesAreValidForTheAIClient validates every recording's parts with the real `ai`
// client and checks that the browser assembles one message per response.
func TestFramesAreValidForTheAIClient(t *testing.T) {
	for _, name := range nativeCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := replayClient(t, loadRecording(t, name))
			var frames []engines.Frame
			var order []string
			for _, ev := range readAll(t, c) {
				out, ok := ev.(engines.ResponseOutput)
				if !ok {
					continue
				}
				require.NotEmpty(t, out.ResponseID, "every Codex part belongs to a turn")
				if !slices.Contains(order, out.ResponseID) {
					order = append(order, out.ResponseID)
				}
				frames = append(frames, out.Frame)
			}
			report := uicheck.RequireValidChunks(t, frames)
			require.Len(t, report.Messages, len(order))
			for i, id := range order {
				require.Equal(t, id, report.Messages[i].ID)
			}
		})
	}
}

func ofType(evs []engines.Event, typ engines.EventType) []engines.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(e engines.Event) bool { return e.Type() != typ })
}

func frameTypes(evs []engines.Event) []string {
	var out []string
	for _, ev := range ofType(evs, engines.EventResponseOutput) {
		out = append(out, ev.(engines.ResponseOutput).Frame.Type())
	}
	return out
}

// TestTranslationFacts checks the facts each recording exists to show.
func TestTranslationFacts(t *testing.T) {
	t.Parallel()
	events := func(name string) []engines.Event {
		c, _ := replayClient(t, loadRecording(t, name))
		return readAll(t, c)
	}
	ended := func(evs []engines.Event) engines.ResponseEnded {
		e := ofType(evs, engines.EventResponseEnded)
		require.Len(t, e, 1)
		return e[0].(engines.ResponseEnded)
	}

	// A message sent while a turn streams joins it: one response lists both inputs,
	// and the stream Codex abandoned for it is withdrawn.
	joined := events("message_while_streaming")
	started := ofType(joined, engines.EventResponseStarted)
	require.Len(t, started[len(started)-1].(engines.ResponseStarted).InputIDs, 2)
	require.Len(t, ofType(joined, engines.EventInputAdmitted), 2)
	require.Equal(t, engines.OutcomeCompleted, ended(joined).Outcome)
	require.Contains(t, frameTypes(joined), "message-metadata", "the abandoned text is retracted")

	// Endings keep Codex's own status word.
	require.Equal(t, engines.OutcomeCancelled, ended(events("interrupt_streaming")).Outcome)
	require.Equal(t, "interrupted", ended(events("interrupt_during_tool")).NativeReason)
	failed := ended(events("model_error_400"))
	require.Equal(t, engines.OutcomeFailed, failed.Outcome)
	require.Equal(t, "failed", failed.NativeReason)
	require.Contains(t, failed.Error.Message, "scripted error 400")
	require.NotEmpty(t, ended(events("plain_text")).Usage, "token usage reaches ResponseEnded")

	// Commands and file changes are tool parts under Codex's item types.
	cmd := events("command")
	var names []string
	for _, ev := range ofType(cmd, engines.EventResponseOutput) {
		if f := ev.(engines.ResponseOutput).Frame; f.Type() == "tool-input-available" {
			names = append(names, f.StringField("toolName"))
		}
	}
	require.Equal(t, []string{"commandExecution"}, names)
	require.Contains(t, frameTypes(events("file_change")), "data-file-changes")
	require.Contains(t, frameTypes(events("reasoning")), "reasoning-delta")

	// Approvals: answered ones close as answered and show the decision; the one an
	// interrupt abandoned closes as withdrawn.
	for name, approved := range map[string]bool{"approval_accept": true, "approval_decline": false, "approval_file_change": true} {
		evs := events(name)
		closed := ofType(evs, engines.EventInteractionClosed)
		require.Len(t, closed, 1, name)
		require.Equal(t, engines.ClosureAnswered, closed[0].(engines.InteractionClosed).Reason, name)
		var decisions []bool
		for _, ev := range ofType(evs, engines.EventResponseOutput) {
			if f := ev.(engines.ResponseOutput).Frame; f.Type() == "tool-approval-response" {
				raw, _ := f.Field("approved")
				decisions = append(decisions, string(raw) == "true")
			}
		}
		require.Equal(t, []bool{approved}, decisions, name)
	}
	withdrawn := ofType(events("interrupt_while_approval_pending"), engines.EventInteractionClosed)
	require.Len(t, withdrawn, 1)
	require.Equal(t, engines.ClosureWithdrawn, withdrawn[0].(engines.InteractionClosed).Reason)
}

// TestAnswerRepliesWithCodexDecision answers the open approval of a recording cut
// before the answer and checks the JSON-RPC reply Codex gets (this request offered
// cancel beyond accept and decline, in availableDecisions).
func TestAnswerRepliesWithCodexDecision(t *testing.T) {
	t.Parallel()
	for decision, native := range map[string]string{engines.DecisionApprove: "accept", engines.DecisionDeny: "decline", "cancel": "cancel"} {
		rec := loadRecording(t, "approval_accept")
		cut := slices.IndexFunc(rec.journal, func(l engines.OutputLine) bool {
			return strings.Contains(string(l.Data), `"method":"item/commandExecution/requestApproval"`)
		})
		require.Positive(t, cut)
		rec.journal = rec.journal[:cut+1]
		c, box := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		id := st.PendingInteractions[0].InteractionID
		require.NoError(t, c.Answer(ctx, id, engines.InteractionAnswer{Decision: decision}))
		writes := box.Written()
		require.Len(t, writes, 1)
		require.Equal(t, "answer:"+id+` {"id":0,"result":{"decision":"`+native+`"}}`, writes[0])
		require.ErrorIs(t, c.Answer(ctx, "no-such-interaction", engines.InteractionAnswer{Decision: engines.DecisionApprove}), engines.ErrInteractionNotOpen)
		cancel()
	}
}

// TestSubmitSendsTurnStart checks the turn/start an input becomes, and that an input
// the rollout already holds is not sent again.
func TestSubmitSendsTurnStart(t *testing.T) {
	t.Parallel()
	rec := loadRecording(t, "plain_text")
	c, box := replayClient(t, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.SetPermissionMode(ctx, "untrusted"))
	require.Error(t, c.SetPermissionMode(ctx, "bypassPermissions"), "only Codex's own policies")
	input := engines.RuntimeInput{InputID: "5b0f3f59-3f7e-4a4e-9a59-7d2b8f3c1d10", Content: []engines.InputContent{{Type: engines.InputText, Text: "hi"}}}
	require.NoError(t, c.Submit(ctx, input))
	writes := box.Written()
	require.Len(t, writes, 1)
	writeID, line, _ := strings.Cut(writes[0], " ")
	require.Equal(t, "input:"+input.InputID, writeID)
	var req struct {
		ID     string         `json:"id"`
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &req))
	require.Equal(t, "turn/start", req.Method)
	require.Equal(t, input.InputID, req.Params["clientUserMessageId"])
	require.Equal(t, rec.meta.ThreadID, req.Params["threadId"])
	require.Equal(t, "untrusted", req.Params["approvalPolicy"])
	require.Equal(t, map[string]any{"type": "externalSandbox", "networkAccess": "restricted"}, req.Params["sandboxPolicy"])

	// The recorded input is in the rollout: it is not sent again.
	var recorded struct {
		Params struct {
			ClientUserMessageID string `json:"clientUserMessageId"`
		} `json:"params"`
	}
	for _, l := range rec.stdin {
		if strings.Contains(l, `"turn/start"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &recorded))
		}
	}
	require.NoError(t, c.Submit(ctx, engines.RuntimeInput{InputID: recorded.Params.ClientUserMessageID, Content: input.Content}))
	require.Len(t, box.Written(), 1)
}

// TestMessageDuringToolWaitsForItsRolloutLine replays message_during_tool with the
// rollout as it was while the command ran: Codex had answered the second turn/start
// (the input joined the turn) but held the message in memory, so it is not admitted.
func TestMessageDuringToolWaitsForItsRolloutLine(t *testing.T) {
	t.Parallel()
	rec := loadRecording(t, "message_during_tool")
	var inputs []string
	for _, l := range rec.stdin {
		var req struct {
			Method string `json:"method"`
			Params struct {
				ClientUserMessageID string `json:"clientUserMessageId"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &req))
		if req.Method == "turn/start" {
			inputs = append(inputs, req.Params.ClientUserMessageID)
		}
	}
	require.Len(t, inputs, 2)
	lines := strings.SplitAfter(string(rec.rollout), "\n")
	cut := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"client_id":"`+inputs[1]+`"`) })
	require.Positive(t, cut)
	rec.rollout = []byte(strings.Join(lines[:cut], ""))

	c, _ := replayClient(t, rec)
	evs := readAll(t, c)
	var admitted []string
	for _, ev := range ofType(evs, engines.EventInputAdmitted) {
		admitted = append(admitted, ev.(engines.InputAdmitted).InputID)
	}
	require.Equal(t, inputs[:1], admitted, "the held message is not admitted before its rollout line")
	started := ofType(evs, engines.EventResponseStarted)
	require.Equal(t, inputs, started[len(started)-1].(engines.ResponseStarted).InputIDs, "it joined the running turn")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, inputs[:1], st.AdmittedInputIDs)
}
