package pi_test

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
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/uicheck"
)

func TestAdapterContract(t *testing.T) {
	t.Parallel()
	enginetest.RunAdapterContract(t, pi.NewAdapter(pi.Config{}))
}

func TestRegistersInARegistry(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register(pi.EngineKind, pi.NewAdapter(pi.Config{})))
	require.Error(t, reg.Register(pi.EngineKind, pi.NewAdapter(pi.Config{})), "a second Pi adapter is refused")
	caps := pi.NewAdapter(pi.Config{}).Capabilities()
	require.Equal(t, []string{"ask", "allow-all"}, caps.PermissionModes, "the platform extension's modes")
	require.Equal(t, "PI_CODING_AGENT_DIR", caps.Workload.ConfigDirEnv)
	require.Equal(t, "sessions/{engine_session_key}.jsonl", caps.SessionLog.PathPattern)
	require.True(t, caps.RequiresProcessSessions)
	require.Empty(t, caps.Extensions.MCPTransports, "no extension is declared before it is applied")
}

// TestRuntimeClientContract runs the structural suite and the connected checks over a
// client replaying a native recording.
func TestRuntimeClientContract(t *testing.T) {
	t.Parallel()
	caps := pi.NewAdapter(pi.Config{}).Capabilities()
	enginetest.RunRuntimeClientContract(t, reflect.TypeFor[*pi.Client](),
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
				require.NotEmpty(t, out.ResponseID, "every Pi part belongs to a run")
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

// inputIDs are the input ids of the prompts a recording sent, in order.
func inputIDs(t testing.TB, rec recording) []string {
	var ids []string
	for _, l := range rec.stdin {
		var cmd struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &cmd))
		if id, ok := strings.CutPrefix(cmd.ID, "input:"); ok && cmd.Type == "prompt" {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestTranslationFacts checks the facts each recording exists to show.
func TestTranslationFacts(t *testing.T) {
	t.Parallel()
	events := func(name string) []engines.Event {
		c, _ := replayClient(t, loadRecording(t, name))
		return readAll(t, c)
	}
	endings := func(evs []engines.Event) []engines.ResponseEnded {
		var out []engines.ResponseEnded
		for _, e := range ofType(evs, engines.EventResponseEnded) {
			out = append(out, e.(engines.ResponseEnded))
		}
		return out
	}
	last := func(evs []engines.Event) engines.ResponseEnded {
		e := endings(evs)
		require.NotEmpty(t, e)
		return e[len(e)-1]
	}

	// A plain run: one response for the input, admitted, Pi's stop reason verbatim,
	// usage summed.
	plain := events("plain_text")
	rec := loadRecording(t, "plain_text")
	started := ofType(plain, engines.EventResponseStarted)
	require.Len(t, started, 1)
	require.Equal(t, inputIDs(t, rec), started[0].(engines.ResponseStarted).InputIDs)
	require.Len(t, ofType(plain, engines.EventInputAdmitted), 1)
	require.Equal(t, "stop", last(plain).NativeReason)
	require.Equal(t, engines.OutcomeCompleted, last(plain).Outcome)
	var u struct {
		Input, Output int64
	}
	require.NoError(t, json.Unmarshal(last(plain).Usage, &u))
	require.Positive(t, u.Input)
	require.Positive(t, u.Output)

	// Two runs, each admitting its own input.
	two := events("two_turns")
	require.Len(t, endings(two), 2)
	require.Len(t, ofType(two, engines.EventInputAdmitted), 2)

	// A message sent while Pi streams is a steering message of the running run: the
	// last response lists both inputs, and both are admitted.
	for _, name := range []string{"message_while_streaming", "message_during_tool"} {
		evs := events(name)
		ids := inputIDs(t, loadRecording(t, name))
		require.Len(t, ids, 3, name)
		started := ofType(evs, engines.EventResponseStarted)
		require.Equal(t, ids[1:], started[len(started)-1].(engines.ResponseStarted).InputIDs, name)
		require.Len(t, endings(evs), 2, name)
		require.Len(t, ofType(evs, engines.EventInputAdmitted), 3, name)
	}

	// An abort leaves a steering message in Pi's queue: the next run delivers it after
	// its own prompt, and each user message is paired with its own input.
	aborted := events("interrupt_with_queued_message")
	ids := inputIDs(t, loadRecording(t, "interrupt_with_queued_message"))
	require.Len(t, ids, 4)
	ends := endings(aborted)
	require.Len(t, ends, 3)
	require.Equal(t, "aborted", ends[1].NativeReason)
	started = ofType(aborted, engines.EventResponseStarted)
	require.Equal(t, []string{ids[3], ids[2]}, started[len(started)-1].(engines.ResponseStarted).InputIDs,
		"the run's prompt first, then the steering message the abort left")
	var admitted []string
	for _, ev := range ofType(aborted, engines.EventInputAdmitted) {
		admitted = append(admitted, ev.(engines.InputAdmitted).InputID)
	}
	require.Equal(t, []string{ids[0], ids[1], ids[3], ids[2]}, admitted)

	// Endings keep Pi's own stop reason.
	for _, name := range []string{"interrupt_streaming", "interrupt_during_tool", "interrupt_while_approval_pending"} {
		e := last(events(name))
		require.Equal(t, engines.OutcomeCancelled, e.Outcome, name)
		require.Equal(t, "aborted", e.NativeReason, name)
	}
	failed := last(events("model_error_400"))
	require.Equal(t, engines.OutcomeFailed, failed.Outcome)
	require.Equal(t, "error", failed.NativeReason)
	require.Contains(t, failed.Error.Message, "scripted error 400")

	// Tools are tool parts under Pi's tool names; thinking is reasoning.
	var names []string
	for _, ev := range ofType(events("tool_call"), engines.EventResponseOutput) {
		if f := ev.(engines.ResponseOutput).Frame; f.Type() == "tool-input-available" {
			names = append(names, f.StringField("toolName"))
		}
	}
	require.Equal(t, []string{"bash"}, names)
	require.Contains(t, frameTypes(events("reasoning")), "reasoning-delta")
	require.Contains(t, frameTypes(events("interrupt_during_tool")), "tool-output-error")

	// Approvals: answered ones close as answered and show the decision; the one the
	// abort withdrew closes as withdrawn.
	for name, approved := range map[string]bool{"approval_allow": true, "approval_deny": false} {
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
	require.Contains(t, frameTypes(events("approval_deny")), "tool-output-denied")
	withdrawn := ofType(events("interrupt_while_approval_pending"), engines.EventInteractionClosed)
	require.Len(t, withdrawn, 1)
	require.Equal(t, engines.ClosureWithdrawn, withdrawn[0].(engines.InteractionClosed).Reason)
}

// TestFirstPromptWaitsForTheSessionFile replays plain_text with no session file yet,
// as Pi leaves it until the first assistant message ends: Pi delivered the input, but
// it is not admitted, and the platform keeps custody.
func TestFirstPromptWaitsForTheSessionFile(t *testing.T) {
	t.Parallel()
	rec := loadRecording(t, "plain_text")
	rec.session = nil
	c, _ := replayClient(t, rec)
	evs := readAll(t, c)
	require.Empty(t, ofType(evs, engines.EventInputAdmitted))
	require.Len(t, ofType(evs, engines.EventResponseEnded), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.Empty(t, st.AdmittedInputIDs)
}

// TestSessionFileNamesEveryInput: the platform extension records each input's id on the
// user message Pi writes, so a new client (a new Pi on the same file) knows every
// admitted input, in order.
func TestSessionFileNamesEveryInput(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"two_turns", "message_while_streaming", "interrupt_with_queued_message"} {
		rec := loadRecording(t, name)
		ids := inputIDs(t, rec)
		c, _ := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.State(ctx)
		cancel()
		require.NoError(t, err)
		require.ElementsMatch(t, ids, st.AdmittedInputIDs, name)
		require.NotContains(t, string(rec.session), "astrabox-input:", "the marker never reaches Pi's history")
	}
}

// TestAnswerRepliesWithTheExtensionsOption answers the open question of a recording
// cut before the answer and checks the extension UI response Pi gets.
func TestAnswerRepliesWithTheExtensionsOption(t *testing.T) {
	t.Parallel()
	for decision, value := range map[string]string{engines.DecisionApprove: "Allow", engines.DecisionDeny: "Deny"} {
		rec := loadRecording(t, "approval_allow")
		cut := slices.IndexFunc(rec.journal, func(l engines.OutputLine) bool {
			return strings.Contains(string(l.Data), `"method":"select"`)
		})
		require.Positive(t, cut)
		var req struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(rec.journal[cut].Data, &req))
		rec.journal = rec.journal[:cut+1]
		c, box := replayClient(t, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		require.Equal(t, engines.StatusWaiting, st.Status)
		id := st.PendingInteractions[0].InteractionID
		require.NoError(t, c.Answer(ctx, id, engines.InteractionAnswer{Decision: decision}))
		writes := box.Written()
		require.Len(t, writes, 1)
		require.Equal(t, "answer:"+id+` {"id":"`+req.ID+`","type":"extension_ui_response","value":"`+value+`"}`, writes[0])
		require.ErrorIs(t, c.Answer(ctx, "no-such-interaction", engines.InteractionAnswer{Decision: engines.DecisionApprove}), engines.ErrInteractionNotOpen)
		cancel()
	}
}

// TestSubmitSendsAPrompt checks the prompt an input becomes and what is refused.
func TestSubmitSendsAPrompt(t *testing.T) {
	t.Parallel()
	c, box := replayClient(t, loadRecording(t, "plain_text"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	input := engines.RuntimeInput{InputID: "5b0f3f59-3f7e-4a4e-9a59-7d2b8f3c1d10", Content: []engines.InputContent{
		{Type: engines.InputText, Text: "hi"}, {Type: engines.InputImage, URL: "data:image/png;base64,iVBORw0KGgo="}}}
	require.NoError(t, c.Submit(ctx, input))
	writes := box.Written()
	require.Len(t, writes, 1)
	writeID, l, _ := strings.Cut(writes[0], " ")
	require.Equal(t, "input:"+input.InputID, writeID)
	require.JSONEq(t, `{"id":"input:`+input.InputID+`","type":"prompt","message":"\u2063astrabox-input:`+input.InputID+`\u2063hi",`+
		`"streamingBehavior":"steer","images":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}`, l)

	// The recorded input is in the session file: it is not sent again.
	recorded := inputIDs(t, loadRecording(t, "plain_text"))
	require.Len(t, recorded, 1)
	require.NoError(t, c.Submit(ctx, engines.TextInput(recorded[0], "hello there")))
	require.Len(t, box.Written(), 1)

	var refused *engines.RuntimeInputRefused
	require.ErrorAs(t, c.Submit(ctx, engines.TextInput("x", "/reload")), &refused, "a Pi command is not a message")
	require.ErrorAs(t, c.Submit(ctx, engines.RuntimeInput{InputID: "y", Content: []engines.InputContent{
		{Type: engines.InputImage, URL: "https://example.com/a.png"}}}), &refused)
	require.Error(t, c.SetPermissionMode(ctx, "bypassPermissions"), "only the extension's modes")
	require.Len(t, box.Written(), 1)
}

// TestAgentConfigPiCannotTakeIsRefused: Pi takes Skills and instructions; what it
// cannot take is refused on save with a message naming the field.
func TestAgentConfigPiCannotTakeIsRefused(t *testing.T) {
	t.Parallel()
	caps := pi.NewAdapter(pi.Config{}).Capabilities()
	require.NoError(t, engines.ValidateAgentConfigFor(caps, engines.AgentConfig{
		Skills:       []engines.SkillConfig{{Name: "review", Description: "Reviews a change", Instructions: "Read the diff."}},
		Instructions: "Answer in French.",
	}))
	for field, cfg := range map[string]engines.AgentConfig{
		"mcp_servers":   {MCPServers: []engines.MCPServerConfig{{Name: "git", Transport: engines.MCPTransportStdio, Command: []string{"git-mcp"}}}},
		"packages":      {Packages: []engines.PackageConfig{{Kind: "plugin", Name: "x"}}},
		"native_config": {NativeConfig: map[string]json.RawMessage{"settings.json": json.RawMessage(`{}`)}},
	} {
		err := engines.ValidateAgentConfigFor(caps, cfg)
		require.ErrorContains(t, err, field, field)
	}
}
