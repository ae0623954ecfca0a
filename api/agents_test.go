package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthRequiresAValidBearerToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.call("GET", "/api/v1/sessions", "", nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", "/api/v1/sessions", "abx_not-a-real-token", nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", "/api/v1/sessions", "", nil, "Authorization", "Basic dXNlcjpwdw==").refused(t, http.StatusUnauthorized, CodeUnauthorized)
	f.call("GET", "/api/v1/sessions", f.member, nil).ok(t)

	// A token revoked elsewhere (another process, here the store itself) stops working
	// as soon as the revocation's announcement arrives; the API's own revocation is
	// refused from the next request on (TestUsersAndTokensLifecycle).
	u, err := f.st.GetUserByEmail(f.ctx, "other@example.test")
	require.NoError(t, err)
	tok, plain, err := f.st.CreateAPIToken(f.ctx, u.ID, "revoked", nil)
	require.NoError(t, err)
	f.call("GET", "/api/v1/sessions", plain, nil).ok(t)
	require.NoError(t, f.st.RevokeAPIToken(f.ctx, tok.ID))
	require.Eventually(t, func() bool {
		return f.call("GET", "/api/v1/sessions", plain, nil).Status == http.StatusUnauthorized
	}, 30*time.Second, 10*time.Millisecond, "refused once the revocation is announced")
	f.call("GET", "/api/v1/sessions", plain, nil).refused(t, http.StatusUnauthorized, CodeUnauthorized)
}

func TestAgentLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var a agentView
	f.call("POST", "/api/v1/agents", f.member, map[string]any{
		"name": "  reviewer  ", "runtime_profile_id": f.profile.ID, "permission_mode": "plan",
		"config": map[string]any{"mcp_servers": []any{map[string]any{"name": "fs", "transport": "stdio", "command": []string{"mcp-fs"}}}},
	}).ok(t).into(t, &a)
	assert.Equal(t, "reviewer", a.Name)
	assert.Equal(t, testEngine, a.EngineKind)
	assert.Equal(t, int64(1), a.Version)
	require.NotNil(t, a.PermissionMode)
	assert.Equal(t, "plan", *a.PermissionMode)

	var got agentView
	f.call("GET", "/api/v1/agents/"+a.AgentID, f.other, nil).ok(t).into(t, &got)
	assert.Equal(t, a.AgentID, got.AgentID)
	var list []agentView
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t).into(t, &list)
	assert.Len(t, list, 2)

	// Updates carry the version read; a stale one is refused and changes nothing.
	var saved agentView
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": 1, "description": "reviews code"}).ok(t).into(t, &saved)
	assert.Equal(t, int64(2), saved.Version)
	assert.Equal(t, "reviews code", saved.Description)
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": 1, "description": "stale"}).
		refused(t, http.StatusConflict, CodeConflict)
	f.call("GET", "/api/v1/agents/"+a.AgentID, f.member, nil).ok(t).into(t, &got)
	assert.Equal(t, "reviews code", got.Description)

	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"description": "no version"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "version")
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.other, map[string]any{"version": 2, "description": "not mine"}).
		refused(t, http.StatusForbidden, CodeForbidden)
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.admin, map[string]any{"version": 2, "name": "admin-renamed"}).ok(t)
	// The Agent's own profile may be disabled since; the Agent stays editable, but it
	// cannot move back to a disabled profile.
	var p2 profileView
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p2", "engine_kind": testEngine, "sandbox_backend": "local"}).ok(t).into(t, &p2)
	f.call("POST", "/api/v1/runtime-profiles/"+f.profile.ID+"/disable", f.admin, nil).ok(t)
	f.call("PATCH", "/api/v1/agents/"+f.agent.ID, f.admin, map[string]any{"version": 1, "description": "still editable"}).ok(t)
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": 3, "runtime_profile_id": p2.RuntimeProfileID}).ok(t)
	f.call("PATCH", "/api/v1/agents/"+a.AgentID, f.member, map[string]any{"version": 4, "runtime_profile_id": f.profile.ID}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "disabled")
	f.call("GET", "/api/v1/agents/00000000-0000-0000-0000-000000000000", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
	f.call("GET", "/api/v1/agents/not-a-uuid", f.member, nil).refused(t, http.StatusNotFound, CodeNotFound)
}

func TestAgentValidationRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	disabled := f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "off", "engine_kind": testEngine, "sandbox_backend": "local", "enabled": false}).ok(t)
	var off profileView
	disabled.into(t, &off)
	var assistant profileView
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "asst", "engine_kind": "assistantonly", "sandbox_backend": "local"}).ok(t).into(t, &assistant)

	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"name": "x", "runtime_profile_id": f.profile.ID}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"malformed", `{"name":`, "body"},
		{"not an object", `[1]`, "body"},
		{"unknown field", base(map[string]any{"colour": "red"}), "colour"},
		{"wrong type", base(map[string]any{"name": 5}), "name"},
		{"empty name", base(map[string]any{"name": "  "}), "name"},
		{"long name", base(map[string]any{"name": strings.Repeat("n", 201)}), "name"},
		{"missing profile", map[string]any{"name": "x"}, "runtime_profile_id"},
		{"unknown profile", base(map[string]any{"runtime_profile_id": "00000000-0000-0000-0000-000000000000"}), "runtime_profile_id"},
		{"disabled profile", base(map[string]any{"runtime_profile_id": off.RuntimeProfileID}), "runtime_profile_id"},
		{"engine without Agents", base(map[string]any{"runtime_profile_id": assistant.RuntimeProfileID}), "runtime_profile_id"},
		{"unknown permission mode", base(map[string]any{"permission_mode": "yolo"}), "permission_mode"},
		{"unaccepted transport", base(map[string]any{"config": map[string]any{"mcp_servers": []any{map[string]any{"name": "w", "transport": "http", "url": "http://x"}}}}), "config.mcp_servers[0].transport"},
		{"unknown config field", base(map[string]any{"config": map[string]any{"mcp": 1}}), "config.mcp"},
		{"unaccepted package kind", base(map[string]any{"config": map[string]any{"packages": []any{map[string]any{"kind": "gem", "name": "x"}}}}), "config.packages[0].kind"},
		{"version on create", base(map[string]any{"version": 3}), "version"},
	}
	for _, tc := range cases {
		r := f.call("POST", "/api/v1/agents", f.member, tc.body)
		r.refused(t, http.StatusBadRequest, CodeInvalidRequest)
		assert.Contains(t, r.Message, tc.field, tc.name)
	}
	var list []agentView
	f.call("GET", "/api/v1/agents", f.member, nil).ok(t).into(t, &list)
	assert.Len(t, list, 1, "refused requests wrote nothing")

	// A taken name is a conflict.
	f.call("POST", "/api/v1/agents", f.member, base(map[string]any{"name": "code-reviewer"})).refused(t, http.StatusConflict, CodeConflict)
}

func TestRuntimeProfiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.call("POST", "/api/v1/runtime-profiles", f.member, map[string]any{"name": "p", "engine_kind": testEngine, "sandbox_backend": "local"}).
		refused(t, http.StatusForbidden, CodeForbidden)
	r := f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p", "engine_kind": testEngine, "sandbox_backend": "local",
		"tracing": map[string]any{"enabled": true, "endpoint": "http://otel"}})
	r.refused(t, http.StatusBadRequest, CodeInvalidRequest, "tracing.enabled")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p", "engine_kind": "missing", "sandbox_backend": "local"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "engine_kind")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p", "engine_kind": testEngine, "sandbox_backend": "kubernetes"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "sandbox_backend")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p", "engine_kind": testEngine, "sandbox_backend": "local", "sandbox_tenancy": "shared"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "sandbox_tenancy")
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p", "engine_kind": testEngine, "sandbox_backend": "local", "tracing": map[string]any{"enabled": "yes"}}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "tracing.enabled")

	var p profileView
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "p2", "engine_kind": testEngine, "sandbox_backend": "local",
		"tracing": map[string]any{"enabled": false, "endpoint": "http://otel"}, "resources": map[string]any{"cpu": 2}}).ok(t).into(t, &p)
	assert.True(t, p.Offered)
	f.call("POST", "/api/v1/runtime-profiles", f.admin, map[string]any{"name": "asst", "engine_kind": "assistantonly", "sandbox_backend": "local"}).ok(t)

	names := func(token, query string) []string {
		var list []profileView
		f.call("GET", "/api/v1/runtime-profiles"+query, token, nil).ok(t).into(t, &list)
		var out []string
		for _, v := range list {
			out = append(out, v.Name)
		}
		return out
	}
	assert.Equal(t, []string{"p2", "test-profile"}, names(f.member, ""), "only enabled profiles whose program supports Agents are offered")
	f.call("POST", "/api/v1/runtime-profiles/"+p.RuntimeProfileID+"/disable", f.member, nil).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("POST", "/api/v1/runtime-profiles/"+p.RuntimeProfileID+"/disable", f.admin, nil).ok(t)
	assert.Equal(t, []string{"test-profile"}, names(f.member, ""))
	assert.Equal(t, []string{"asst", "p2", "test-profile"}, names(f.admin, "?include_disabled=true"))
	f.call("GET", "/api/v1/runtime-profiles?include_disabled=true", f.member, nil).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("GET", "/api/v1/runtime-profiles?include_disabled=maybe", f.admin, nil).refused(t, http.StatusBadRequest, CodeInvalidRequest, "include_disabled")
	f.call("POST", "/api/v1/runtime-profiles/"+p.RuntimeProfileID+"/enable", f.admin, nil).ok(t)
	assert.Equal(t, []string{"p2", "test-profile"}, names(f.member, ""))

	var upd profileView
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"image": "test:2", "prewarm_size": 2}).ok(t).into(t, &upd)
	assert.Equal(t, "test:2", upd.Image)
	assert.Equal(t, 2, upd.PrewarmSize)
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"engine_kind": "assistantonly"}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "engine_kind")
	f.call("PATCH", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.admin, map[string]any{"prewarm_size": -1}).
		refused(t, http.StatusBadRequest, CodeInvalidRequest, "prewarm_size")
	f.call("GET", "/api/v1/runtime-profiles/"+p.RuntimeProfileID, f.member, nil).ok(t).into(t, &upd)
	assert.Equal(t, 2, upd.PrewarmSize, "a refused update changed nothing")
}
