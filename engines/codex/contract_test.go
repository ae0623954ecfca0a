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
	require.Equal(t, []string{"untrusted", "on-request", "never"}, caps.PermissionModes[:3])
	require.Len(t, caps.PermissionModes, 3+32, "the three policy strings, then every granular combination")
	require.Equal(t, `{"granular":{"sandbox_approval":false,"rules":false,"skill_approval":false,"request_permissions":false,"mcp_elicitations":false}}`, caps.PermissionModes[3])
	require.Equal(t, `{"granular":{"sandbox_approval":true,"rules":true,"skill_approval":true,"request_permissions":true,"mcp_elicitations":true}}`, caps.PermissionModes[34])
	require.Equal(t, codex.GranularPolicy{Rules: true, MCPElicitations: true}.Mode(), caps.PermissionModes[3+8+1])
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

// TestElicitationReplies answers the MCP elicitation of a recording cut before the
// answer: the form's values accept it with its content, a declared option answers with
// that action, and the interaction closes with serverRequest/resolved.
func TestElicitationReplies(t *testing.T) {
	t.Parallel()
	full := readAll(t, func() *codex.Client { c, _ := replayClient(t, loadRecording(t, "mcp_elicitation_accept")); return c }())
	opened := ofType(full, engines.EventInteractionOpened)
	require.Len(t, opened, 1)
	c := opened[0].(engines.InteractionOpened).Contract
	require.Equal(t, engines.PresentationForm, c.Presentation)
	require.Equal(t, "mcpServer/elicitation/request", c.Native.Type)
	require.Equal(t, "Your name?", c.Prompt)
	require.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string","title":"Name"}},"required":["name"]}`, string(c.Schema))
	closed := ofType(full, engines.EventInteractionClosed)
	require.Len(t, closed, 1)
	require.Equal(t, engines.ClosureAnswered, closed[0].(engines.InteractionClosed).Reason)
	require.Empty(t, ofType(readAll(t, func() *codex.Client {
		c, _ := replayClient(t, loadRecording(t, "mcp_elicitation_disallowed"))
		return c
	}()), engines.EventInteractionOpened), "Codex declined by itself")

	for _, tc := range []struct {
		answer engines.InteractionAnswer
		result string
	}{
		{engines.InteractionAnswer{Values: json.RawMessage(`{"name":"Ada"}`)}, `{"action":"accept","content":{"name":"Ada"},"_meta":null}`},
		{engines.InteractionAnswer{Decision: "decline"}, `{"action":"decline","content":null,"_meta":null}`},
		{engines.InteractionAnswer{Decision: "cancel"}, `{"action":"cancel","content":null,"_meta":null}`},
	} {
		rec := loadRecording(t, "mcp_elicitation_accept")
		cut := slices.IndexFunc(rec.journal, func(l engines.OutputLine) bool {
			return strings.Contains(string(l.Data), `"method":"mcpServer/elicitation/request"`)
		})
		require.Positive(t, cut)
		rec.journal = rec.journal[:cut+1]
		client, box := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := client.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		require.Equal(t, engines.RuntimeStatus(engines.StatusWaiting), st.Status)
		id := st.PendingInteractions[0].InteractionID
		require.Error(t, client.Answer(ctx, id, engines.InteractionAnswer{Values: json.RawMessage(`{}`)}), "the required name")
		require.Error(t, client.Answer(ctx, id, engines.InteractionAnswer{Decision: "acceptForSession"}), "not an option of an elicitation")
		require.NoError(t, client.Answer(ctx, id, tc.answer))
		writes := box.Written()
		require.Len(t, writes, 1)
		_, line, _ := strings.Cut(writes[0], " ")
		var reply struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &reply))
		require.JSONEq(t, tc.result, string(reply.Result))
		cancel()
	}
}

// TestUserInputReplies answers Codex's question (request_user_input) of a recording cut
// before the answer: a form with one property per question id, answered with Codex's
// ToolRequestUserInputResponse.
func TestUserInputReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ values, result string }{
		{`{"color":"Blue"}`, `{"answers":{"color":{"answers":["Blue"]}}}`},
		{`{"color":["Red","Green"]}`, `{"answers":{"color":{"answers":["Red","Green"]}}}`},
	} {
		rec := loadRecording(t, "request_user_input")
		cut := slices.IndexFunc(rec.journal, func(l engines.OutputLine) bool {
			return strings.Contains(string(l.Data), `"method":"item/tool/requestUserInput"`)
		})
		require.Positive(t, cut)
		rec.journal = rec.journal[:cut+1]
		client, box := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := client.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		p := st.PendingInteractions[0]
		require.Equal(t, engines.PresentationForm, p.Contract.Presentation)
		require.JSONEq(t, `{"type":"object","required":["color"],"properties":{"color":{"type":"string","title":"Color",
			"description":"Which color?","examples":["Red","Blue"]}}}`, string(p.Contract.Schema), "isOther: the labels are suggestions")
		require.Error(t, client.Answer(ctx, p.InteractionID, engines.InteractionAnswer{Values: json.RawMessage(`{"color":3}`)}))
		require.NoError(t, client.Answer(ctx, p.InteractionID, engines.InteractionAnswer{Values: json.RawMessage(tc.values)}))
		writes := box.Written()
		require.Len(t, writes, 1)
		_, line, _ := strings.Cut(writes[0], " ")
		var reply struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &reply))
		require.JSONEq(t, tc.result, string(reply.Result))
		cancel()
	}
}

// TestPermissionsReplies answers Codex's permissions request of a recording cut before
// the answer: a decision among Codex's grant scopes and a denial, each replied as
// Codex's PermissionsRequestApprovalResponse.
func TestPermissionsReplies(t *testing.T) {
	t.Parallel()
	for decision, result := range map[string]string{
		"turn":               `{"permissions":{"network":{"enabled":true}},"scope":"turn"}`,
		"session":            `{"permissions":{"network":{"enabled":true}},"scope":"session"}`,
		engines.DecisionDeny: `{"permissions":{},"scope":"turn"}`,
	} {
		rec := loadRecording(t, "request_permissions")
		cut := slices.IndexFunc(rec.journal, func(l engines.OutputLine) bool {
			return strings.Contains(string(l.Data), `"method":"item/permissions/requestApproval"`)
		})
		require.Positive(t, cut)
		rec.journal = rec.journal[:cut+1]
		client, box := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := client.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		p := st.PendingInteractions[0]
		require.Equal(t, engines.PresentationDecision, p.Contract.Presentation)
		require.Contains(t, p.Contract.Prompt, "Fetch the docs.")
		require.Error(t, client.Answer(ctx, p.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "not one of Codex's scopes")
		require.NoError(t, client.Answer(ctx, p.InteractionID, engines.InteractionAnswer{Decision: decision}))
		writes := box.Written()
		require.Len(t, writes, 1)
		_, line, _ := strings.Cut(writes[0], " ")
		var reply struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &reply))
		require.JSONEq(t, result, string(reply.Result))
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

	// A granular policy travels as Codex's object, not as a string.
	granular := codex.GranularPolicy{SandboxApproval: true, MCPElicitations: true}.Mode()
	require.Error(t, c.SetPermissionMode(ctx, `{"granular":{"rules":true}}`), "only the declared granular forms")
	require.NoError(t, c.SetPermissionMode(ctx, granular))
	other := engines.RuntimeInput{InputID: "0d6c2b1e-53a4-4f8e-8f0e-2f4b7c9a1e22", Content: input.Content}
	require.NoError(t, c.Submit(ctx, other))
	writes = box.Written()
	_, line, _ = strings.Cut(writes[len(writes)-1], " ")
	require.NoError(t, json.Unmarshal([]byte(line), &req))
	require.Equal(t, map[string]any{"granular": map[string]any{"sandbox_approval": true, "rules": false, "skill_approval": false,
		"request_permissions": false, "mcp_elicitations": true}}, req.Params["approvalPolicy"])
	require.NoError(t, c.SetPermissionMode(ctx, "untrusted"))

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
	require.Len(t, box.Written(), 2)
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
