package codex_test

import (
	"bytes"
	"encoding/json"
	"path"
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

// TestLiveAgentConfigurationReachesCodex starts the real Codex app-server with an
// Agent's configuration: its stdio and http MCP servers (the echo server shipped in
// testdata) become mcp_servers entries, the stdio one started by Codex in the box and
// reported ready; the scripted model finds each tool through Codex's tool search and
// calls it, and the result reaches the stream with the environment or headers the
// Agent configured; its
// instructions reach the model through AGENTS.md; its config.toml block is merged
// without the keys the platform manages.
func TestLiveAgentConfigurationReachesCodex(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	server := "/workspace/.mcp/mcp-echo.mjs"
	require.NoError(t, box.WriteFile(ctx, nil, server, enginetest.MCPEchoServer, 0o644))
	tag, headerTag := "tag-"+uuid.NewString()[:8], "hdr-"+uuid.NewString()[:8]
	// The http server runs as its own process in the box, as a service the Agent uses.
	web, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "mcp-http", Command: []string{"/usr/bin/node", server, "--http", "18091"}})
	require.NoError(t, err)
	for line, err := range web.ReadOutput(ctx, 0, true) {
		require.NoError(t, err)
		if strings.Contains(string(line.Data), "mcp-echo listening") {
			break
		}
	}
	sc := engines.EngineStartupContext{
		SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID(),
		PermissionMode: "never",
		AgentConfig: engines.AgentConfig{
			MCPServers: []engines.MCPServerConfig{{
				Name: "files", Transport: engines.MCPTransportStdio,
				Command: []string{"node", server}, Env: map[string]string{"MCP_ECHO_TAG": tag},
			}, {
				Name: "web", Transport: engines.MCPTransportHTTP,
				URL: "http://127.0.0.1:18091/mcp", Headers: map[string]string{"X-Echo-Tag": headerTag},
			}},
			Skills: []engines.SkillConfig{{
				Name: "release-notes", Description: "Write release notes from the merged changes " + tag, Instructions: "List every merged change in one line.",
			}},
			Instructions: "Standing instruction " + tag + ": answer briefly.",
			NativeConfig: map[string]json.RawMessage{
				// model_provider is protected: saving refuses it, and the adapter drops it anyway.
				codex.ConfigDocument: json.RawMessage(`{"project_doc_max_bytes": 4096, "model_provider": "elsewhere"}`),
			},
		},
	}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })

	doc, err := box.ReadFile(ctx, nil, path.Join(e.adapter.PathsFor(sc).CodexHome, codex.ConfigDocument))
	require.NoError(t, err)
	require.Contains(t, string(doc), "project_doc_max_bytes = 4096", "the Agent's block, an integer kept an integer")
	require.Contains(t, string(doc), "model_provider = 'astrabox'")
	require.NotContains(t, string(doc), "elsewhere", "a protected key never overrides the platform")

	// Codex starts the Agent's MCP server in the box and reports it ready in its own
	// notification (the echo server answers initialize and tools/list).
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.(*codex.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	var ready bool
	for line, err := range proc.ReadOutput(ctx, 0, true) {
		require.NoError(t, err)
		var n struct {
			Method string `json:"method"`
			Params struct {
				Name   string `json:"name"`
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"params"`
		}
		if json.Unmarshal(line.Data, &n) != nil || n.Method != "mcpServer/startupStatus/updated" || n.Params.Name != "files" {
			continue
		}
		require.NotEqual(t, "failed", n.Params.Status, "the Agent's MCP server failed to start: %s", line.Data)
		if n.Params.Status == "ready" {
			ready = true
			break
		}
	}
	require.True(t, ready, "Codex started the Agent's MCP server")

	r := enginetest.StartLiveReader(t, ctx, client, nil)
	var frames []engines.Frame
	for _, call := range []struct{ server, tag string }{{"files", tag}, {"web", headerTag}} {
		args, err := json.Marshal(map[string]string{"text": "hello-" + call.server})
		require.NoError(t, err)
		require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(),
			devmodel.Directive("tool", "name", enginetest.MCPEchoTool, "server", call.server, "args", string(args)))))
		from := len(r.Seen)
		require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome, enginetest.LastEvents(r.Seen, 30))
		want := "mcp-echo: hello-" + call.server + " [tag=" + call.tag + "]"
		var output bool
		for _, ev := range r.Seen[from:] {
			out, ok := ev.(engines.ResponseOutput)
			if !ok {
				continue
			}
			frames = append(frames, out.Frame)
			if out.Frame.Type() == "tool-output-available" {
				raw, _ := out.Frame.Field("output")
				output = output || strings.Contains(string(raw), want)
			}
		}
		require.True(t, output, "the %s server's result, with what the Agent configured, reached the stream:\n%s", call.server, enginetest.LastEvents(r.Seen[from:], 40))
	}
	uicheck.RequireValidChunks(t, frames)

	var instructed, listed bool
	for _, req := range e.model.Requests() {
		instructed = instructed || bytes.Contains(req.Body, []byte("Standing instruction "+tag))
		listed = listed || (bytes.Contains(req.Body, []byte("release-notes")) && bytes.Contains(req.Body, []byte("Write release notes from the merged changes "+tag)))
	}
	require.True(t, instructed, "the Agent's instructions reached the model")
	require.True(t, listed, "Codex listed the Agent's Skill to the model")
}
