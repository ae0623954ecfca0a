package codex_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
)

// TestLiveGranularPolicyAndElicitation runs the real Codex under granular approval
// policies with an Agent's MCP server that elicits: with mcp_elicitations allowed,
// Codex relays the server's elicitation/create as a form interaction, answered once
// with values and once declined through the contract's answer; with it disallowed,
// Codex declines on its own and no interaction opens.
func TestLiveGranularPolicyAndElicitation(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	server := "/workspace/.mcp/mcp-echo.mjs"
	require.NoError(t, box.WriteFile(ctx, nil, server, enginetest.MCPEchoServer, 0o644))
	asking := codex.GranularPolicy{SandboxApproval: true, MCPElicitations: true}.Mode()
	sc := engines.EngineStartupContext{
		SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID(),
		PermissionMode: asking,
		AgentConfig: engines.AgentConfig{MCPServers: []engines.MCPServerConfig{{
			Name: "asker", Transport: engines.MCPTransportStdio,
			Command: []string{"node", server}, Env: map[string]string{enginetest.MCPElicitEnv: "1"},
		}}},
	}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	elicit := devmodel.Directive("tool", "name", enginetest.MCPElicitTool, "server", "asker", "args", `{"message":"Your name?"}`)

	// toolOutput is the MCP tool's output the turn reported.
	toolOutput := func(from int) string {
		for _, ev := range r.Seen[from:] {
			if out, ok := ev.(engines.ResponseOutput); ok && out.Frame.Type() == "tool-output-available" {
				raw, _ := out.Frame.Field("output")
				return string(raw)
			}
		}
		t.Fatalf("no tool output:\n%s", enginetest.LastEvents(r.Seen[from:], 40))
		return ""
	}
	var frames []engines.Frame
	collect := func(from int) {
		for _, ev := range r.Seen[from:] {
			if out, ok := ev.(engines.ResponseOutput); ok {
				frames = append(frames, out.Frame)
			}
		}
	}

	for _, answer := range []struct {
		answer engines.InteractionAnswer
		want   string
	}{
		{engines.InteractionAnswer{Values: json.RawMessage(`{"name":"Ada"}`)}, `mcp-echo elicited: accept {\"name\":\"Ada\"}`},
		{engines.InteractionAnswer{Decision: "decline"}, `mcp-echo elicited: decline null`},
	} {
		from := len(r.Seen)
		require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), elicit)))
		opened := r.Until("the elicitation", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
		c := opened.Contract
		require.Equal(t, engines.PresentationForm, c.Presentation)
		require.Equal(t, "mcpServer/elicitation/request", c.Native.Type)
		require.Equal(t, "asker", c.Title)
		require.Equal(t, "Your name?", c.Prompt)
		require.Contains(t, string(c.Schema), `"name"`)
		require.Error(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Values: json.RawMessage(`{}`)}), "the form's required field")
		require.NoError(t, client.Answer(ctx, opened.InteractionID, answer.answer))
		closed := r.Until("closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
		require.Equal(t, engines.ClosureAnswered, closed.Reason)
		require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
		require.Contains(t, toolOutput(from), answer.want)
		collect(from)
	}

	// mcp_elicitations false: Codex answers the server itself.
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, codex.GranularPolicy{SandboxApproval: true}.Mode()))
	from := len(r.Seen)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), elicit)))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	for _, ev := range r.Seen[from:] {
		require.NotEqual(t, engines.EventInteractionOpened, ev.Type(), "no interaction under mcp_elicitations false")
	}
	out := toolOutput(from)
	require.True(t, strings.Contains(out, "mcp-echo elicited: decline") || strings.Contains(out, "mcp-echo elicited: cancel"), out)
	collect(from)
	uicheck.RequireValidChunks(t, frames)
}

// TestLiveQuestionAnswered runs the real Codex with its default_mode_request_user_input
// feature: the model's request_user_input call reaches the client as
// item/tool/requestUserInput, a form interaction; the answer, after the reader
// reconnected from its stored cursor, reaches the model as Codex's tool output.
func TestLiveQuestionAnswered(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	cfg := e.adapterConfig
	cfg.Features = []string{"default_mode_request_user_input"}
	adapter := codex.NewAdapter(cfg)
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "never"}
	rt, err := adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	args := `{"questions":[{"id":"color","header":"Color","question":"Which color?","options":[{"label":"Red","description":"Warm."},{"label":"Blue","description":"Cool."}]}]}`
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), devmodel.Directive("tool", "name", "request_user_input", "args", args))))
	opened := r.Until("the question", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	require.Equal(t, engines.PresentationForm, opened.Contract.Presentation)
	require.Equal(t, "item/tool/requestUserInput", opened.Contract.Native.Type)
	require.Equal(t, "Which color?", opened.Contract.Prompt)
	st, err := client.State(ctx)
	require.NoError(t, err)
	require.Equal(t, engines.StatusWaiting, st.Status, "Codex holds the turn for the answer")
	stored := opened.Cursor
	r.Cancel()

	r = enginetest.StartLiveReader(t, ctx, client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Values: json.RawMessage(`{"color":"Blue"}`)}))
	closed := r.Until("closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	last := e.model.Requests()[len(e.model.Requests())-1]
	require.Contains(t, string(last.Body), `{\"answers\":{\"color\":{\"answers\":[\"Blue\"]}}}`, "the model got the answer as Codex's tool output")
}
