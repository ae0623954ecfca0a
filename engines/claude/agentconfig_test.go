package claude_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
)

// TestMCPConfigUsesClaudeCodesOwnFields checks every transport's entry in Claude Code's
// mcpServers form: a stdio server's argv split into command and args, an http or sse
// server's url and headers under its type.
func TestMCPConfigUsesClaudeCodesOwnFields(t *testing.T) {
	t.Parallel()
	doc, err := claude.MCPConfig([]engines.MCPServerConfig{
		{Name: "files", Transport: engines.MCPTransportStdio, Command: []string{"node", "/opt/mcp/files.mjs", "--root", "/workspace"}, Env: map[string]string{"TOKEN": "t"}},
		{Name: "web", Transport: engines.MCPTransportHTTP, URL: "https://mcp.example.test/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
		{Name: "legacy", Transport: engines.MCPTransportSSE, URL: "https://mcp.example.test/sse"},
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"mcpServers": {
		"files": {"type": "stdio", "command": "node", "args": ["/opt/mcp/files.mjs", "--root", "/workspace"], "env": {"TOKEN": "t"}},
		"web": {"type": "http", "url": "https://mcp.example.test/mcp", "headers": {"Authorization": "Bearer x"}},
		"legacy": {"type": "sse", "url": "https://mcp.example.test/sse"}
	}}`, string(doc))
}
