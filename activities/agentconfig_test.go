package activities_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// mcpMount is where the stack's boxes see the echo MCP server shipped in testdata.
const mcpMount = "/opt/mcp"

// TestClaudeCodeGetsItsAgentConfigurationOnAPrewarmedBox runs a Session of an Agent
// configured with a stdio MCP server whose env holds a sealed secret, on a box the
// RuntimeProfile's pool prepared before the Session (and the Agent's configuration)
// was known. Activation writes the configuration into that box before Claude Code
// starts: the scripted model calls the MCP tool, and its result, carrying the secret
// the platform unsealed, reaches the Session's output log.
func TestClaudeCodeGetsItsAgentConfigurationOnAPrewarmedBox(t *testing.T) {
	// Outside t.TempDir, whose parent the box accounts cannot enter.
	dir, err := os.MkdirTemp("", "mcp-echo")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mcp-echo.mjs"), enginetest.MCPEchoServer, 0o644))
	setup, _ := claudeSetup(t)
	setup.mounts = append(setup.mounts, sandbox.Mount{Source: dir, Target: mcpMount})
	setup.prewarm = 1
	setup.secretsKey = make([]byte, 32)
	_, err = rand.Read(setup.secretsKey)
	require.NoError(t, err)
	s := newStackWith(t, setup)

	tag := "sealed-" + uniq()
	config, err := json.Marshal(map[string]any{"mcp_servers": []any{map[string]any{
		"name": "files", "transport": "stdio", "command": []string{"node", mcpMount + "/mcp-echo.mjs"},
		"env": map[string]any{"MCP_ECHO_TAG": "[redacted]"},
	}}})
	require.NoError(t, err)
	mode := "bypassPermissions" // MCP tools ask for approval in the default mode
	s.agent, err = s.st.CreateAgent(s.ctx, store.NewAgent{Name: "configured-" + uniq(), EngineKind: claude.EngineKind,
		RuntimeProfileID: s.profile.ID, Config: config, Secrets: store.AgentSecrets{"/mcp_servers/0/env/MCP_ECHO_TAG": tag},
		PermissionMode: &mode})
	require.NoError(t, err)

	pool := s.backend.Pool()
	waitCtx, cancel := context.WithTimeout(s.ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, pool.WaitReady(waitCtx, s.profile.ID, 1))
	boxes, err := s.backend.List(s.ctx)
	require.NoError(t, err)
	var warm []string
	for _, b := range boxes {
		if pool.Holds(b.ID) {
			warm = append(warm, b.ID)
		}
	}
	require.Len(t, warm, 1)

	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, devmodel.Directive("tool", "name", enginetest.MCPEchoTool, "server", "files", "args", `{"text":"hello-mcp"}`))
	s.eventually("the tool turn", func() bool { return s.admittedAndIdle(id, in) })
	sess := s.session(id)
	require.NotNil(t, sess.SandboxID)
	require.Equal(t, warm[0], *sess.SandboxID, "the Session claimed the prewarmed box")

	want := "mcp-echo: hello-mcp [tag=" + tag + "]"
	require.True(t, slices.ContainsFunc(s.parts(id), func(p store.OutputPart) bool {
		var f struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(p.Frame, &f)
		return f.Type == "tool-output-available" && strings.Contains(string(f.Output), want)
	}), "the MCP server's result, with the unsealed secret, reached the output log")
}
