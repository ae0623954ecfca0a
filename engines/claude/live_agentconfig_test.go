package claude_test

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
)

// TestLiveAgentConfigurationReachesClaude starts the real Claude Code with an Agent's
// configuration: its stdio MCP server (the echo server shipped in testdata, run in the
// box) is called by the scripted model and the tool result reaches the stream, with the
// environment the Agent configured; its Skill is listed to the model; its instructions
// reach the model; its settings.json is written without the keys the platform manages.
func TestLiveAgentConfigurationReachesClaude(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	server := "/workspace/.mcp/mcp-echo.mjs"
	require.NoError(t, box.WriteFile(ctx, nil, server, enginetest.MCPEchoServer, 0o644))
	tag := "tag-" + uuidFor(t)[:8]
	skillDescription := "Write release notes from the merged changes " + tag
	sc := engines.EngineStartupContext{
		SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID(),
		// MCP tools ask for approval in the default mode; this test is about the call.
		PermissionMode: "bypassPermissions",
		AgentConfig: engines.AgentConfig{
			MCPServers: []engines.MCPServerConfig{{
				Name: "files", Transport: engines.MCPTransportStdio,
				Command: []string{"node", server}, Env: map[string]string{"MCP_ECHO_TAG": tag},
			}},
			Skills: []engines.SkillConfig{{
				Name: "release-notes", Description: skillDescription, Instructions: "List every merged change in one line.",
			}},
			Instructions: "Standing instruction " + tag + ": answer briefly.",
			NativeConfig: map[string]json.RawMessage{
				// model is protected: saving refuses it, and the adapter drops it anyway.
				claude.SettingsDocument: json.RawMessage(`{"cleanupPeriodDays": 45, "model": "not-the-platform-one"}`),
			},
		},
	}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })

	paths := e.adapter.PathsFor(sc)
	settings, err := box.ReadFile(ctx, nil, path.Join(paths.ConfigDir, claude.SettingsDocument))
	require.NoError(t, err)
	require.JSONEq(t, `{"cleanupPeriodDays": 45}`, string(settings), "the Agent's settings without protected keys")

	r := startReader(t, ctx, client, nil)
	args, err := json.Marshal(map[string]string{"text": "hello-mcp"})
	require.NoError(t, err)
	input := uuidFor(t)
	require.NoError(t, client.Submit(ctx, engines.TextInput(input,
		devmodel.Directive("tool", "name", enginetest.MCPEchoTool, "server", "files", "args", string(args)))))
	end := ended(r)
	require.Equal(t, engines.OutcomeCompleted, end.Outcome)

	want := "mcp-echo: hello-mcp [tag=" + tag + "]"
	var toolName, toolCall string
	var output bool
	var frames []engines.Frame
	for _, ev := range r.seen {
		out, ok := ev.(engines.ResponseOutput)
		if !ok {
			continue
		}
		frames = append(frames, out.Frame)
		switch out.Frame.Type() {
		case "tool-input-available":
			toolName, toolCall = out.Frame.StringField("toolName"), out.Frame.StringField("toolCallId")
		case "tool-output-available":
			raw, _ := out.Frame.Field("output")
			if out.Frame.StringField("toolCallId") == toolCall && strings.Contains(string(raw), want) {
				output = true
			}
		}
	}
	require.Equal(t, "mcp__files__"+enginetest.MCPEchoTool, toolName, "the model called the Agent's MCP server's tool")
	require.True(t, output, "the MCP server's result, with the Agent's env, reached the stream: %v", frames)
	uicheck.RequireValidChunks(t, frames)

	var listed, instructed bool
	for _, req := range e.model.Requests() {
		listed = listed || (bytes.Contains(req.Body, []byte("release-notes")) && bytes.Contains(req.Body, []byte(skillDescription)))
		instructed = instructed || bytes.Contains(req.Body, []byte("Standing instruction "+tag))
	}
	require.True(t, listed, "Claude Code listed the Agent's Skill to the model")
	require.True(t, instructed, "the Agent's instructions reached the model")
}
