package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/store"
)

// TestAgentConfigurationIsCheckedAgainstEachProgram saves Agents for the real Claude
// Code and Codex adapters: what a program takes is stored, and what it cannot take
// (an undeclared extension, a key of its native configuration the platform manages)
// is refused with the field named in the envelope, writing nothing.
func TestAgentConfigurationIsCheckedAgainstEachProgram(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.registry.Register(claude.EngineKind, claude.NewAdapter(claude.Config{})))
	require.NoError(t, f.registry.Register(codex.EngineKind, codex.NewAdapter(codex.Config{ModelBaseURL: "http://127.0.0.1:1/v1"})))
	profile := func(kind string) string {
		p, err := f.st.CreateRuntimeProfile(f.ctx, store.NewRuntimeProfile{Name: kind + "-profile", EngineKind: kind, Enabled: true, SandboxBackend: store.SandboxLocal})
		require.NoError(t, err)
		return p.ID
	}
	claudeProfile, codexProfile := profile(claude.EngineKind), profile(codex.EngineKind)
	stdio := map[string]any{"name": "files", "transport": "stdio", "command": []string{"node", "/opt/mcp/files.mjs"}, "env": map[string]any{"TOKEN": "s3cret"}}
	skill := map[string]any{"name": "release-notes", "description": "Write release notes", "instructions": "List the merged changes."}

	cases := []struct {
		name    string
		profile string
		config  map[string]any
		field   string
	}{
		{"claude: plugin packages", claudeProfile, map[string]any{"packages": []any{map[string]any{"kind": "plugin", "name": "lint"}}}, "config.packages[0].kind"},
		{"claude: protected settings key", claudeProfile, map[string]any{"native_config": map[string]any{"settings.json": map[string]any{"permissions": map[string]any{"allow": []string{"Bash"}}}}}, "config.native_config.settings.json.permissions"},
		{"claude: settings env", claudeProfile, map[string]any{"native_config": map[string]any{"settings.json": map[string]any{"env": map[string]any{"ANTHROPIC_BASE_URL": "http://elsewhere"}}}}, "config.native_config.settings.json.env"},
		{"claude: codex's document", claudeProfile, map[string]any{"native_config": map[string]any{"config.toml": map[string]any{}}}, "config.native_config.config.toml"},
		{"claude: skill name that is no folder", claudeProfile, map[string]any{"skills": []any{map[string]any{"name": "../etc", "description": "d", "instructions": "i"}}}, "config.skills[0].name"},
		{"claude: skill without description", claudeProfile, map[string]any{"skills": []any{map[string]any{"name": "k", "instructions": "i"}}}, "config.skills[0].description"},
		{"claude: mcp server name", claudeProfile, map[string]any{"mcp_servers": []any{map[string]any{"name": "a b", "transport": "stdio", "command": []string{"x"}}}}, "config.mcp_servers[0].name"},
		{"codex: skill without instructions", codexProfile, map[string]any{"skills": []any{map[string]any{"name": "k", "description": "d"}}}, "config.skills[0].instructions"},
		{"codex: sse mcp server", codexProfile, map[string]any{"mcp_servers": []any{map[string]any{"name": "web", "transport": "sse", "url": "https://mcp.example.test/sse"}}}, "config.mcp_servers[0].transport"},
		{"codex: packages", codexProfile, map[string]any{"packages": []any{map[string]any{"kind": "plugin", "name": "lint"}}}, "config.packages[0].kind"},
		{"codex: protected model provider", codexProfile, map[string]any{"native_config": map[string]any{"config.toml": map[string]any{"model_provider": "elsewhere"}}}, "config.native_config.config.toml.model_provider"},
		{"codex: mcp_servers in config.toml", codexProfile, map[string]any{"native_config": map[string]any{"config.toml": map[string]any{"mcp_servers": map[string]any{}}}}, "config.native_config.config.toml.mcp_servers"},
		{"codex: null in config.toml", codexProfile, map[string]any{"native_config": map[string]any{"config.toml": map[string]any{"project_doc_max_bytes": nil}}}, "config.native_config.config.toml.project_doc_max_bytes"},
		{"codex: claude's document", codexProfile, map[string]any{"native_config": map[string]any{"settings.json": map[string]any{}}}, "config.native_config.settings.json"},
	}
	for _, tc := range cases {
		r := f.call("POST", "/api/v1/agents", f.member, map[string]any{"name": "refused", "runtime_profile_id": tc.profile, "config": tc.config})
		r.refused(t, http.StatusBadRequest, CodeInvalidRequest)
		assert.Contains(t, r.Message, tc.field, tc.name)
	}
	var list []agentView
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t).into(t, &list)
	assert.Len(t, list, 1, "refused requests wrote nothing")

	// What each program takes is stored.
	var saved agentView
	f.call("POST", "/api/v1/agents", f.member, map[string]any{"name": "claude-agent", "runtime_profile_id": claudeProfile, "config": map[string]any{
		"mcp_servers": []any{stdio, map[string]any{"name": "web", "transport": "http", "url": "https://mcp.example.test"}},
		"skills":      []any{skill}, "instructions": "Answer briefly.",
		"native_config": map[string]any{"settings.json": map[string]any{"cleanupPeriodDays": 30}},
	}}).ok(t).into(t, &saved)
	assert.JSONEq(t, `{"name":"files","transport":"stdio","command":["node","/opt/mcp/files.mjs"],"env":{"TOKEN":"[redacted]"}}`, mustField(t, saved.Config, "mcp_servers", 0))
	var codexAgent agentView
	f.call("POST", "/api/v1/agents", f.member, map[string]any{"name": "codex-agent", "runtime_profile_id": codexProfile, "config": map[string]any{
		"mcp_servers": []any{stdio}, "skills": []any{skill}, "instructions": "Answer briefly.",
		"native_config": map[string]any{"config.toml": map[string]any{"project_doc_max_bytes": 4096}},
	}}).ok(t).into(t, &codexAgent)

	// An update setting a protected key is refused and changes nothing.
	r := f.call("PATCH", "/api/v1/agents/"+codexAgent.AgentID, f.member, map[string]any{"version": codexAgent.Version,
		"config": map[string]any{"native_config": map[string]any{"config.toml": map[string]any{"approval_policy": "never"}}}})
	r.refused(t, http.StatusBadRequest, CodeInvalidRequest)
	assert.Contains(t, r.Message, "config.native_config.config.toml.approval_policy")
	var after agentView
	f.call("GET", "/api/v1/agents/"+codexAgent.AgentID, f.member, nil).ok(t).into(t, &after)
	assert.Equal(t, codexAgent.Version, after.Version)
	assert.JSONEq(t, string(codexAgent.Config), string(after.Config))
}

// mustField returns config[key][index] as JSON.
func mustField(t *testing.T, config json.RawMessage, key string, index int) string {
	t.Helper()
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(config, &doc))
	var list []json.RawMessage
	require.NoError(t, json.Unmarshal(doc[key], &list))
	require.Greater(t, len(list), index, "config has %s[%d]", key, index)
	return string(list[index])
}

// TestClaudeCodeProfileTakesATracingEndpoint: Claude Code declares tracing, so a
// RuntimeProfile may enable it with an OTLP/HTTP endpoint; an endpoint that is not one
// is refused naming the field, writing nothing.
func TestClaudeCodeProfileTakesATracingEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.registry.Register(claude.EngineKind, claude.NewAdapter(claude.Config{})))
	create := func(name, endpoint string) reply {
		return f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": name, "engine_kind": claude.EngineKind,
			"image": "/srv/images/claude", "sandbox_backend": "local", "tracing": map[string]any{"enabled": true, "endpoint": endpoint}})
	}
	before, err := f.st.ListRuntimeProfiles(f.ctx, false)
	require.NoError(t, err)
	for _, endpoint := range []string{"otel:4317", "https://user:secret@otel:4318", "http://otel:4318/?key=1"} {
		create("refused", endpoint).refused(t, http.StatusBadRequest, CodeInvalidRequest, "tracing.endpoint")
	}
	after, err := f.st.ListRuntimeProfiles(f.ctx, false)
	require.NoError(t, err)
	require.Len(t, after, len(before), "a refused profile is not stored")

	var p profileView
	create("traced", "https://collector.example:4318/otlp").ok(t).into(t, &p)
	stored, err := f.st.GetRuntimeProfileByID(f.ctx, p.RuntimeProfileID)
	require.NoError(t, err)
	require.JSONEq(t, `{"enabled": true, "endpoint": "https://collector.example:4318/otlp"}`, string(stored.Tracing))
}
