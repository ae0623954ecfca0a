package api

import (
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/acp"
)

// withACPPrograms registers the generic ACP kind, whose RuntimeProfiles define their
// program, as the platform does.
func withACPPrograms(o *Options) {
	err := o.Registry.RegisterProgramKind(acp.KindProgram, acp.ProgramBuilder(func(acp.ModelAPI) string { return "http://127.0.0.1:1" }))
	if err != nil {
		panic(fmt.Sprintf("register the ACP program kind: %v", err))
	}
}

// testACPProgram is a valid acp_program, fresh on each call.
func testACPProgram() map[string]any {
	return map[string]any{"title": "My agent", "command": []string{"/opt/my-agent/bin/my-agent", "--acp"},
		"env": map[string]string{"MY_AGENT_BASE_URL": "{model_base_url}"}, "model_key_env": "OPENAI_API_KEY", "model_api": "openai",
		"state_dir": ".my-agent", "modes": []string{"ask", "auto"}, "default_mode": "ask",
		"busy": "queued", "admission": "prompt_reply", "resume": "load", "mcp_transports": []string{"stdio"}}
}

// TestRuntimeProfileDefinesACPProgram: an administrator adds an ACP program by saving a
// RuntimeProfile of the generic kind; every bad definition is refused naming the field
// and stores nothing; an Agent on the profile takes the program's modes and MCP
// transports, and its Sessions start in the program's default mode.
func TestRuntimeProfileDefinesACPProgram(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withACPPrograms)
	profile := func(edit func(m map[string]any)) map[string]any {
		body := map[string]any{"name": "my-agent", "engine_kind": acp.KindProgram, "sandbox_backend": "local", "acp_program": testACPProgram()}
		edit(body)
		return body
	}
	program := func(edit func(p map[string]any)) func(m map[string]any) {
		return func(m map[string]any) {
			p := maps.Clone(m["acp_program"].(map[string]any))
			edit(p)
			m["acp_program"] = p
		}
	}
	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"missing command":              {profile(program(func(p map[string]any) { delete(p, "command") })), "acp_program.command"},
		"bad busy":                     {profile(program(func(p map[string]any) { p["busy"] = "sometimes" })), "acp_program.busy"},
		"bad model_api":                {profile(program(func(p map[string]any) { p["model_api"] = "cohere" })), "acp_program.model_api"},
		"unknown field":                {profile(program(func(p map[string]any) { p["mounts"] = []any{map[string]any{"source": "/", "target": "/host"}} })), "acp_program.mounts"},
		"wrong type":                   {profile(program(func(p map[string]any) { p["modes"] = "ask" })), "acp_program.modes"},
		"default mode not a mode":      {profile(program(func(p map[string]any) { p["default_mode"] = "yolo" })), "acp_program.default_mode"},
		"not an object":                {profile(func(m map[string]any) { m["acp_program"] = []string{"my-agent"} }), "acp_program"},
		"acp kind without program":     {profile(func(m map[string]any) { delete(m, "acp_program") }), "acp_program"},
		"acp kind with a null program": {profile(func(m map[string]any) { m["acp_program"] = nil }), "acp_program"},
		"program on an installed kind": {profile(func(m map[string]any) { m["engine_kind"] = testEngine }), "acp_program"},
		"unknown field beside program": {profile(func(m map[string]any) { m["acp_programs"] = []any{} }), "acp_programs"},
		"unavailable backend":          {profile(func(m map[string]any) { m["sandbox_backend"] = "kubernetes" }), "sandbox_backend"},
	} {
		r := f.call("POST", "/api/v1/runtime-profiles", f.admin, tc.body)
		r.refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
		assert.Contains(t, r.Message, tc.field+":", name)
	}
	var all []profileView
	f.call("GET", "/api/v1/runtime-profiles?include_disabled=true", f.admin, nil).ok(t).into(t, &all)
	require.Len(t, all, 1, "refused profiles stored nothing")
	f.call("POST", "/api/v1/runtime-profiles", f.member, profile(func(map[string]any) {})).refused(t, http.StatusForbidden, CodeForbidden)

	// An image-less local profile is accepted: its program comes from the platform's
	// pinned ACP installs.
	var p profileView
	f.call("POST", "/api/v1/runtime-profiles", f.admin, profile(func(map[string]any) {})).ok(t).into(t, &p)
	assert.True(t, p.Offered)
	assert.Equal(t, acp.KindProgram, p.EngineKind)
	assert.JSONEq(t, mustJSON(t, testACPProgram()), string(p.ACPProgram))

	// An Agent on it: the program's modes and MCP transports are what it may choose.
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "my-agent-reviewer", "runtime_profile_id": p.RuntimeProfileID}
		maps.Copy(m, extra)
		return m
	}
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"permission_mode": "acceptEdits"})).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "permission_mode", "[ask auto]")
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"config": map[string]any{"instructions": "Be brief."}})).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "config.instructions")
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"config": map[string]any{"mcp_servers": []any{
		map[string]any{"name": "web", "transport": "http", "url": "http://127.0.0.1:9/mcp"}}}})).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "config.mcp_servers[0].transport")
	var agent agentView
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"permission_mode": "auto", "config": map[string]any{"mcp_servers": []any{
		map[string]any{"name": "files", "transport": "stdio", "command": []string{"mcp-files"}}}}})).ok(t).into(t, &agent)
	assert.Equal(t, acp.KindProgram, agent.EngineKind)

	// A Session of an Agent without a mode starts in the program's default mode, and
	// takes only the program's modes.
	var plain agentView
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"name": "plain"})).ok(t).into(t, &plain)
	var created createdSession
	f.call("POST", "/api/v1/agents/"+plain.AgentID+"/conversations", f.member, "{}").ok(t).into(t, &created)
	assert.Equal(t, "ask", *f.session(created.SessionID, f.member).PermissionMode)
	f.call("POST", "/api/v1/sessions/"+created.SessionID+"/permission-mode", f.member, map[string]any{"permission_mode": "plan"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "permission_mode", "[ask auto]")
	var d sessionDetails
	f.call("POST", "/api/v1/sessions/"+created.SessionID+"/permission-mode", f.member, map[string]any{"permission_mode": "auto"}).ok(t).into(t, &d)
	assert.Equal(t, "auto", *d.PermissionMode)

	// PATCH replaces the whole program, validated as on creation; a refused one
	// changes nothing.
	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"bad busy":            {map[string]any{"acp_program": map[string]any{"command": []string{"x"}, "busy": "never"}}, "acp_program.busy"},
		"engine kind changed": {map[string]any{"engine_kind": testEngine}, "engine_kind"},
	} {
		r := f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, tc.body)
		r.refused(t, http.StatusBadRequest, CodeInvalidRequest, tc.field)
		assert.Contains(t, r.Message, tc.field, name)
	}
	changed := testACPProgram()
	changed["modes"], changed["default_mode"], changed["busy"] = []string{"ask"}, "ask", "cancels"
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.member, map[string]any{"acp_program": changed}).
		refused(t, http.StatusForbidden, CodeForbidden)
	var saved profileView
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"acp_program": changed}).ok(t).into(t, &saved)
	assert.JSONEq(t, mustJSON(t, changed), string(saved.ACPProgram))
	// The saved program is what Agents are checked against from now on.
	f.call("PATCH", "/api/v1/agents/"+plain.AgentID, f.member, map[string]any{"version": 1, "permission_mode": "auto"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "permission_mode", "[ask]")
	// A name-only update keeps the program.
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"name": "my-agent-2"}).ok(t).into(t, &saved)
	assert.JSONEq(t, mustJSON(t, changed), string(saved.ACPProgram))
	// Installed kinds show no program.
	var installed profileView
	f.call("GET", "/api/v1/runtime-profiles/"+f.profile.ID, f.member, nil).ok(t).into(t, &installed)
	assert.JSONEq(t, "null", string(installed.ACPProgram))
	f.call("PATCH", "/api/v1/runtime-profiles/"+f.profile.ID, f.admin, map[string]any{"acp_program": testACPProgram()}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "acp_program")
	_, ok := f.registry.Adapter(acp.KindProgram)
	assert.False(t, ok, "no adapter is registered under the generic kind")
}
