package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAgentSecretsAreWriteOnly saves an Agent with an MCP env value and an
// Authorization header: no answer shows them, only the creator and administrators
// read the configuration at all, the redaction marker sent back keeps them (also when
// the servers are reordered), and the platform still reads them in full.
func TestAgentSecretsAreWriteOnly(t *testing.T) {
	t.Parallel()
	logs, observed := observer.New(zapcore.DebugLevel)
	f := newFixture(t, func(o *Options) { o.Logger = zap.New(logs) })
	const envSecret, headerSecret = "ghp_env-secret-1234", "Bearer header-secret-5678"
	git := map[string]any{"name": "git", "transport": "stdio", "command": []string{"git-mcp"}, "env": map[string]string{"GITHUB_TOKEN": envSecret}}
	search := map[string]any{"name": "search", "transport": "sse", "url": "https://mcp.example/sse", "headers": map[string]string{"Authorization": headerSecret}}
	created := f.call("POST", "/api/v1/agents", f.member, map[string]any{
		"name": "secretive", "runtime_profile_id": f.profile.ID,
		"config": map[string]any{"mcp_servers": []any{git, search}},
	}).ok(t)
	var a agentView
	created.into(t, &a)
	noSecret := func(what string, raw []byte) {
		t.Helper()
		assert.NotContains(t, string(raw), "env-secret", what)
		assert.NotContains(t, string(raw), "header-secret", what)
	}
	noSecret("create answer", created.Data)
	redacted := `{"mcp_servers":[
		{"name":"git","transport":"stdio","command":["git-mcp"],"env":{"GITHUB_TOKEN":"[redacted]"}},
		{"name":"search","transport":"sse","url":"https://mcp.example/sse","headers":{"Authorization":"[redacted]"}}]}`
	assert.JSONEq(t, redacted, string(a.Config))

	// The creator and administrators read the redacted configuration; other members
	// list and use the Agent but see no configuration.
	for _, tok := range []string{f.member, f.admin} {
		got := f.call("GET", "/api/v1/agents/"+a.AgentID, tok, nil).ok(t)
		noSecret("get", got.Data)
		var v agentView
		got.into(t, &v)
		assert.JSONEq(t, redacted, string(v.Config))
	}
	var other agentView
	f.call("GET", "/api/v1/agents/"+a.AgentID, f.other, nil).ok(t).into(t, &other)
	assert.Equal(t, "null", string(other.Config))
	list := f.call("GET", "/api/v1/agents", f.other, nil).ok(t)
	noSecret("list", list.Data)
	var views []agentView
	list.into(t, &views)
	require.Len(t, views, 2)
	for _, v := range views {
		assert.Equal(t, "null", string(v.Config), v.Name)
	}
	f.call("POST", "/api/v1/agents/"+a.AgentID+"/conversations", f.other, "{}").ok(t)

	// Sending the markers back, servers reordered, keeps both values; a marker for a key
	// the Agent never had is refused.
	var back map[string]any
	require.NoError(t, json.Unmarshal(a.Config, &back))
	servers := back["mcp_servers"].([]any)
	back["mcp_servers"] = []any{servers[1], servers[0]}
	saved := f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": a.Version, "config": back}).ok(t)
	noSecret("update answer", saved.Data)
	saved.into(t, &a)
	runtime, err := f.st.GetAgentRuntimeConfig(f.ctx, a.AgentID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"mcp_servers":[
		{"name":"search","transport":"sse","url":"https://mcp.example/sse","headers":{"Authorization":"`+headerSecret+`"}},
		{"name":"git","transport":"stdio","command":["git-mcp"],"env":{"GITHUB_TOKEN":"`+envSecret+`"}}]}`, string(runtime))
	servers = back["mcp_servers"].([]any)
	servers[1].(map[string]any)["env"] = map[string]string{"OTHER": RedactedSecret}
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": a.Version, "config": back}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "config.mcp_servers[1].env.OTHER")

	// A new value replaces the kept one.
	servers[1].(map[string]any)["env"] = map[string]string{"GITHUB_TOKEN": "rotated"}
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": a.Version, "config": back}).ok(t)
	secrets, err := f.st.GetAgentSecrets(f.ctx, a.AgentID)
	require.NoError(t, err)
	assert.Equal(t, "rotated", secrets["/mcp_servers/1/env/GITHUB_TOKEN"])
	assert.Equal(t, headerSecret, secrets["/mcp_servers/0/headers/Authorization"])

	// A value saved in clear before secrets were sealed is shown redacted too.
	f.exec(`UPDATE agents SET config = '{"mcp_servers":[{"name":"old","transport":"stdio","command":["x"],"env":{"K":"legacy-env-secret"}}]}', secrets = NULL WHERE id = $1`, f.agent.ID)
	old := f.call("GET", "/api/v1/agents/"+f.agent.ID, f.admin, nil).ok(t)
	noSecret("legacy", old.Data)
	assert.Contains(t, string(old.Data), RedactedSecret)

	for _, e := range observed.All() {
		line := e.Message
		for _, fld := range e.Context {
			line += " " + fld.String
			if err, ok := fld.Interface.(error); ok {
				line += " " + err.Error()
			}
		}
		assert.False(t, strings.Contains(line, "secret-") || strings.Contains(line, "rotated"), "a log line holds a secret: %s", line)
	}
}
