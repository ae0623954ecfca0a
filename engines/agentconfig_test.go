package engines_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

func registryWith(t *testing.T, adapters ...*testAdapter) *engines.Registry {
	t.Helper()
	reg := engines.NewRegistry()
	for _, a := range adapters {
		require.NoError(t, reg.Register(a.caps.EngineKind, a))
	}
	return reg
}

func TestValidateAgentConfigAcceptsDeclaredValues(t *testing.T) {
	t.Parallel()
	reg := registryWith(t, validAdapter("example"))
	err := reg.ValidateAgentConfig("example", engines.AgentConfig{
		MCPServers: []engines.MCPServerConfig{
			{Name: "files", Transport: engines.MCPTransportStdio, Command: []string{"mcp-files"}},
			{Name: "web", Transport: engines.MCPTransportHTTP, URL: "https://mcp.example.com"},
		},
		Skills:       []engines.SkillConfig{{Name: "review", Description: "Review a change", Instructions: "Read the diff."}},
		Packages:     []engines.PackageConfig{{Kind: "plugin", Name: "lint", Version: "1.0.0"}},
		NativeConfig: map[string]json.RawMessage{"settings.json": json.RawMessage(`{"model":"opus"}`)},
	})
	require.NoError(t, err)
}

func TestValidateAgentConfigRejects(t *testing.T) {
	t.Parallel()
	noSkills := validAdapter("noskills")
	noSkills.caps.Extensions.Skills = nil
	reg := registryWith(t, validAdapter("example"), noSkills)
	cases := []struct {
		name  string
		kind  string
		cfg   engines.AgentConfig
		field string
	}{
		{"unknown engine", "ghost", engines.AgentConfig{}, "engine_kind"},
		{"undeclared transport", "example", engines.AgentConfig{MCPServers: []engines.MCPServerConfig{
			{Name: "s", Transport: engines.MCPTransportSSE, URL: "https://x"}}}, "mcp_servers[0].transport"},
		{"stdio without command", "example", engines.AgentConfig{MCPServers: []engines.MCPServerConfig{
			{Name: "s", Transport: engines.MCPTransportStdio}}}, "mcp_servers[0].command"},
		{"http without url", "example", engines.AgentConfig{MCPServers: []engines.MCPServerConfig{
			{Name: "s", Transport: engines.MCPTransportHTTP}}}, "mcp_servers[0].url"},
		{"duplicate server names", "example", engines.AgentConfig{MCPServers: []engines.MCPServerConfig{
			{Name: "s", Transport: engines.MCPTransportStdio, Command: []string{"a"}},
			{Name: "s", Transport: engines.MCPTransportStdio, Command: []string{"b"}}}}, "mcp_servers.name[1]"},
		{"skills on an engine without skills", "noskills", engines.AgentConfig{Skills: []engines.SkillConfig{{Name: "k", Description: "d", Instructions: "i"}}}, "skills"},
		{"skill without description", "example", engines.AgentConfig{Skills: []engines.SkillConfig{{Name: "k", Instructions: "i"}}}, "skills[0].description"},
		{"skill without instructions", "example", engines.AgentConfig{Skills: []engines.SkillConfig{{Name: "k", Description: "d"}}}, "skills[0].instructions"},
		{"skill name that is no folder name", "example", engines.AgentConfig{Skills: []engines.SkillConfig{{Name: "../x", Description: "d", Instructions: "i"}}}, "skills[0].name"},
		{"mcp server name that is no key", "example", engines.AgentConfig{MCPServers: []engines.MCPServerConfig{
			{Name: "a.b", Transport: engines.MCPTransportStdio, Command: []string{"a"}}}}, "mcp_servers[0].name"},
		{"instructions on an engine without an instructions file", "example", engines.AgentConfig{Instructions: "Be brief."}, "instructions"},
		{"undeclared package kind", "example", engines.AgentConfig{Packages: []engines.PackageConfig{{Kind: "npm", Name: "x"}}}, "packages[0].kind"},
		{"undeclared config document", "example", engines.AgentConfig{NativeConfig: map[string]json.RawMessage{
			"config.toml": json.RawMessage(`{}`)}}, "native_config.config.toml"},
		{"config document not an object", "example", engines.AgentConfig{NativeConfig: map[string]json.RawMessage{
			"settings.json": json.RawMessage(`[1]`)}}, "native_config.settings.json"},
		{"protected key set", "example", engines.AgentConfig{NativeConfig: map[string]json.RawMessage{
			"settings.json": json.RawMessage(`{"model":"x","permissions":{"allow":["*"]}}`)}}, "native_config.settings.json.permissions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := reg.ValidateAgentConfig(tc.kind, tc.cfg)
			require.ErrorIs(t, err, engines.ErrInvalid)
			var ve *engines.ValidationError
			require.ErrorAs(t, err, &ve)
			require.True(t, ve.HasField(tc.field), "want a problem on %s, got %v", tc.field, err)
		})
	}
}

func TestValidateRuntimeProfile(t *testing.T) {
	t.Parallel()
	tracing := validAdapter("tracing")
	tracing.caps.Extensions.Tracing = true
	boxAccount := validAdapter("boxaccount")
	boxAccount.caps.ConversationPlacement = engines.PlacementBoxAccount
	process := validAdapter("process")
	process.caps.RequiresProcessSessions = true
	noImage := validAdapter("noimage")
	noImage.caps.DefaultRuntimeImage = ""
	reg := registryWith(t, validAdapter("example"), tracing, boxAccount, process, noImage)

	ok := func(kind string) engines.RuntimeProfileSpec {
		return engines.RuntimeProfileSpec{EngineKind: kind, SandboxTenancy: engines.TenancyConversation,
			Backend: engines.SandboxBackendCapabilities{SupportsProcessSessions: true, SupportsIsolatedSessions: true}}
	}
	require.NoError(t, reg.ValidateRuntimeProfile(ok("example")))
	withTracing := ok("tracing")
	withTracing.Tracing = engines.TracingConfig{Enabled: true, Endpoint: "http://otel:4318"}
	require.NoError(t, reg.ValidateRuntimeProfile(withTracing))
	// A valid disabled tracing configuration stays storable with an adapter without tracing.
	disabled := ok("example")
	disabled.Tracing = engines.TracingConfig{Enabled: false, Endpoint: "http://otel:4318"}
	require.NoError(t, reg.ValidateRuntimeProfile(disabled))

	cases := []struct {
		name  string
		spec  func() engines.RuntimeProfileSpec
		field string
	}{
		{"unknown engine", func() engines.RuntimeProfileSpec { return ok("ghost") }, "engine_kind"},
		{"tracing on an engine without it", func() engines.RuntimeProfileSpec {
			s := ok("example")
			s.Tracing = engines.TracingConfig{Enabled: true, Endpoint: "http://otel:4318"}
			return s
		}, "tracing.enabled"},
		{"tracing without endpoint", func() engines.RuntimeProfileSpec {
			s := ok("tracing")
			s.Tracing.Enabled = true
			return s
		}, "tracing.endpoint"},
		{"tracing endpoint not an OTLP/HTTP URL", func() engines.RuntimeProfileSpec {
			s := ok("tracing")
			s.Tracing = engines.TracingConfig{Enabled: true, Endpoint: "otel:4317"}
			return s
		}, "tracing.endpoint"},
		{"tracing endpoint with credentials", func() engines.RuntimeProfileSpec {
			s := ok("tracing")
			s.Tracing = engines.TracingConfig{Enabled: true, Endpoint: "https://user:secret@otel:4318"}
			return s
		}, "tracing.endpoint"},
		{"no image and no default", func() engines.RuntimeProfileSpec { return ok("noimage") }, "runtime_image"},
		{"process sessions unsupported", func() engines.RuntimeProfileSpec {
			s := ok("process")
			s.Backend.SupportsProcessSessions = false
			return s
		}, "sandbox_tenancy"},
		{"shared tenancy without isolated sessions", func() engines.RuntimeProfileSpec {
			s := ok("example")
			s.SandboxTenancy = engines.TenancyShared
			s.Backend.SupportsIsolatedSessions = false
			return s
		}, "sandbox_tenancy"},
		{"shared tenancy with box account", func() engines.RuntimeProfileSpec {
			s := ok("boxaccount")
			s.SandboxTenancy = engines.TenancyShared
			return s
		}, "sandbox_tenancy"},
		{"unknown tenancy", func() engines.RuntimeProfileSpec {
			s := ok("example")
			s.SandboxTenancy = "pooled"
			return s
		}, "sandbox_tenancy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := reg.ValidateRuntimeProfile(tc.spec())
			var ve *engines.ValidationError
			require.ErrorAs(t, err, &ve)
			require.True(t, ve.HasField(tc.field), "want a problem on %s, got %v", tc.field, err)
		})
	}
	shared := ok("example")
	shared.SandboxTenancy = engines.TenancyShared
	require.NoError(t, reg.ValidateRuntimeProfile(shared))
	noProcess := ok("example")
	noProcess.Backend.SupportsProcessSessions = false
	require.NoError(t, reg.ValidateRuntimeProfile(noProcess), "only engines requiring process sessions need them")
}
