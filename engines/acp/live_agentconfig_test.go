package acp_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
)

func TestLiveAgentConfigurationCodexACP(t *testing.T) {
	runLiveAgentConfiguration(t, acp.KindCodex, "agent-full-access")
}

func TestLiveAgentConfigurationClaudeACP(t *testing.T) {
	runLiveAgentConfiguration(t, acp.KindClaude, "bypassPermissions")
}

func TestLiveAgentConfigurationOpencode(t *testing.T) {
	runLiveAgentConfiguration(t, acp.KindOpencode, "")
}

// runLiveAgentConfiguration starts a shipped ACP program with an Agent's configuration:
// its stdio and http MCP servers (the echo server in a box) go to the program through
// ACP's mcpServers of session/new, the scripted model calls each server's tool and the
// result, carrying the environment or headers the Agent set, reaches the stream; its
// instructions reach the model through the profile's instructions file. The program
// runs in a mode that does not ask before a tool, so the calls need no answer.
func runLiveAgentConfiguration(t *testing.T, kind, mode string) {
	e := newLiveEnv(t, kind)
	ctx := e.ctx
	_, box := e.newBox()
	server := "/workspace/.mcp/mcp-echo.mjs"
	require.NoError(t, box.WriteFile(ctx, nil, server, enginetest.MCPEchoServer, 0o644))
	web, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "mcp-http", Command: []string{"/usr/bin/node", server, "--http", "18091"}})
	require.NoError(t, err)
	for line, err := range web.ReadOutput(ctx, 0, true) {
		require.NoError(t, err)
		if strings.Contains(string(line.Data), "mcp-echo listening") {
			break
		}
	}
	tag, headerTag := "tag-"+uuid.NewString()[:8], "hdr-"+uuid.NewString()[:8]
	caps := e.adapter.Capabilities()
	cfg := engines.AgentConfig{
		MCPServers: []engines.MCPServerConfig{
			{Name: "files", Transport: engines.MCPTransportStdio, Command: []string{"/usr/bin/node", server}, Env: map[string]string{"MCP_ECHO_TAG": tag}},
			{Name: "web", Transport: engines.MCPTransportHTTP, URL: "http://127.0.0.1:18091/mcp", Headers: map[string]string{"X-Echo-Tag": headerTag}},
		},
	}
	if caps.Extensions.InstructionsFile != "" {
		cfg.Instructions = "Standing instruction " + tag + ": answer briefly."
	}
	require.NoError(t, engines.ValidateAgentConfigFor(caps, cfg), "the profile declares what the Agent sets")
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: mode, AgentConfig: cfg}
	if e.adapter.StartupMaterialRequest().RuntimeStateStorage {
		sc.CallbackCredentials = enginetest.NewMemoryRuntimeState().Credentials("session:" + sc.SessionID)
	}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	var frames []engines.Frame
	for _, call := range []struct{ server, tag string }{{"files", tag}, {"web", headerTag}} {
		args, err := json.Marshal(map[string]string{"text": "hello-" + call.server})
		require.NoError(t, err)
		from := len(r.Seen)
		require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(),
			devmodel.Directive("tool", "name", enginetest.MCPEchoTool, "server", call.server, "args", string(args)))))
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, "").Outcome, enginetest.LastEvents(r.Seen, 30))
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
				output = output || strings.Contains(string(raw), want) || strings.Contains(string(raw), strings.ReplaceAll(want, `"`, `\"`))
			}
		}
		require.True(t, output, "the %s server's result, with what the Agent configured, reached the stream:\n%s", call.server, enginetest.LastEvents(r.Seen[from:], 40))
	}
	uicheck.RequireValidChunks(t, frames)
	if cfg.Instructions != "" {
		var instructed bool
		for _, req := range e.model.Requests() {
			instructed = instructed || bytes.Contains(req.Body, []byte("Standing instruction "+tag))
		}
		require.True(t, instructed, "the Agent's instructions reached the model")
	}
}
