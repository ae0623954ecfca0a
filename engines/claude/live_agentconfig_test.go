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
// configuration: its stdio, http and sse MCP servers (the echo server shipped in
// testdata, run in the box) are called by the scripted model and the tool results reach the
// stream, with the environment and headers the Agent configured; its Skill is listed to
// the model; its instructions reach the model; its settings.json is written without the
// keys the platform manages.
func TestLiveAgentConfigurationReachesClaude(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	server := "/workspace/.mcp/mcp-echo.mjs"
	require.NoError(t, box.WriteFile(ctx, nil, server, enginetest.MCPEchoServer, 0o644))
	tag, headerTag, sseTag := "tag-"+uuidFor(t)[:8], "hdr-"+uuidFor(t)[:8], "sse-"+uuidFor(t)[:8]
	// The http server runs as its own process in the box, as a service the Agent uses.
	web, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "mcp-http", Command: []string{"/usr/bin/node", server, "--http", "18091"}})
	require.NoError(t, err)
	for line, err := range web.ReadOutput(ctx, 0, true) {
		require.NoError(t, err)
		if strings.Contains(string(line.Data), "mcp-echo listening") {
			break
		}
	}
	skillDescription := "Write release notes from the merged changes " + tag
	sc := engines.EngineStartupContext{
		SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID(),
		// MCP tools ask for approval in the default mode; this test is about the call.
		PermissionMode: "bypassPermissions",
		AgentConfig: engines.AgentConfig{
			MCPServers: []engines.MCPServerConfig{{
				Name: "files", Transport: engines.MCPTransportStdio,
				Command: []string{"node", server}, Env: map[string]string{"MCP_ECHO_TAG": tag},
			}, {
				Name: "web", Transport: engines.MCPTransportHTTP,
				URL: "http://127.0.0.1:18091/mcp", Headers: map[string]string{"X-Echo-Tag": headerTag},
			}, {
				Name: "legacy", Transport: engines.MCPTransportSSE,
				URL: "http://127.0.0.1:18091/sse", Headers: map[string]string{"X-Echo-Tag": sseTag},
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

	r := enginetest.StartLiveReader(t, ctx, client, nil)
	var frames []engines.Frame
	for _, call := range []struct{ server, tag string }{{"files", tag}, {"web", headerTag}, {"legacy", sseTag}} {
		args, err := json.Marshal(map[string]string{"text": "hello-" + call.server})
		require.NoError(t, err)
		require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t),
			devmodel.Directive("tool", "name", enginetest.MCPEchoTool, "server", call.server, "args", string(args)))))
		from := len(r.Seen)
		require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)

		want := "mcp-echo: hello-" + call.server + " [tag=" + call.tag + "]"
		var toolName, toolCall string
		var output bool
		for _, ev := range r.Seen[from:] {
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
		require.Equal(t, "mcp__"+call.server+"__"+enginetest.MCPEchoTool, toolName, "the model called the Agent's MCP server's tool")
		require.True(t, output, "the %s server's result, with what the Agent configured, reached the stream", call.server)
	}
	uicheck.RequireValidChunks(t, frames)

	var listed, instructed bool
	for _, req := range e.model.Requests() {
		listed = listed || (bytes.Contains(req.Body, []byte("release-notes")) && bytes.Contains(req.Body, []byte(skillDescription)))
		instructed = instructed || bytes.Contains(req.Body, []byte("Standing instruction "+tag))
	}
	require.True(t, listed, "Claude Code listed the Agent's Skill to the model")
	require.True(t, instructed, "the Agent's instructions reached the model")
}
