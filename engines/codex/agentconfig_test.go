package codex_test

import (
	"encoding/json"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/codex"
)

// TestConfigTOMLMergesTheAgentsBlockUnderThePlatformsKeys decodes the written
// config.toml: the Agent's block keeps its types and nesting, a protected key it holds
// (stored before the key was protected, say) gives way to the platform's value, and
// its MCP servers are mcp_servers tables in Codex's own field names.
func TestConfigTOMLMergesTheAgentsBlockUnderThePlatformsKeys(t *testing.T) {
	t.Parallel()
	a := codex.NewAdapter(codex.Config{ModelBaseURL: "http://127.0.0.1:47081/v1", Model: "gpt-5.5"})
	doc, err := a.ConfigTOML(engines.AgentConfig{
		MCPServers: []engines.MCPServerConfig{{Name: "files", Transport: engines.MCPTransportStdio,
			Command: []string{"node", "/opt/mcp/files.mjs"}, Env: map[string]string{"TOKEN": "t"}}},
		NativeConfig: map[string]json.RawMessage{codex.ConfigDocument: json.RawMessage(
			`{"project_doc_max_bytes": 4096, "temperature_hint": 0.5, "tui": {"notifications": true}, "model_provider": "elsewhere"}`)},
	})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, toml.Unmarshal(doc, &got), string(doc))
	require.Equal(t, int64(4096), got["project_doc_max_bytes"])
	require.Equal(t, 0.5, got["temperature_hint"])
	require.Equal(t, map[string]any{"notifications": true}, got["tui"])
	require.Equal(t, "astrabox", got["model_provider"])
	require.Equal(t, "gpt-5.5", got["model"])
	require.Equal(t, map[string]any{"plugins": false}, got["features"])
	require.Equal(t, map[string]any{"files": map[string]any{"command": "node", "args": []any{"/opt/mcp/files.mjs"},
		"env": map[string]any{"TOKEN": "t"}}}, got["mcp_servers"])
	provider := got["model_providers"].(map[string]any)["astrabox"].(map[string]any)
	require.Equal(t, "http://127.0.0.1:47081/v1", provider["base_url"])
	require.Equal(t, "responses", provider["wire_api"])
}

// TestCheckAgentConfigRefusesWhatTOMLCannotHold: null has no TOML form, so a block
// holding one is refused on save, naming the key.
func TestCheckAgentConfigRefusesWhatTOMLCannotHold(t *testing.T) {
	t.Parallel()
	a := codex.NewAdapter(codex.Config{})
	problems := a.CheckAgentConfig(engines.AgentConfig{NativeConfig: map[string]json.RawMessage{
		codex.ConfigDocument: json.RawMessage(`{"ok": 1, "tui": {"theme": null}}`)}})
	require.Len(t, problems, 1)
	require.Equal(t, "native_config.config.toml.tui", problems[0].Field)
	require.Contains(t, problems[0].Message, "theme: null has no TOML form")
}
