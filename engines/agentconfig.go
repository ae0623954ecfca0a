package engines

import (
	"encoding/json"
	"fmt"
	"slices"
)

// AgentConfig is the extension configuration an author saves on an Agent. Saving it
// runs ValidateAgentConfig so a value the engine does not accept is refused instead of
// being stored as an inert setting.
type AgentConfig struct {
	MCPServers []MCPServerConfig `json:"mcp_servers"`
	Skills     []SkillConfig     `json:"skills"`
	Packages   []PackageConfig   `json:"packages"`
	// NativeConfig maps a native configuration document name to the object block the
	// author sets in it; protected keys are managed by the platform.
	NativeConfig map[string]json.RawMessage `json:"native_config"`
}

// MCPServerConfig is one author MCP server.
type MCPServerConfig struct {
	Name      string       `json:"name"`
	Transport MCPTransport `json:"transport"`
	// Command and Env start a stdio server.
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach an http or sse server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// SkillConfig is one Skill to place where the engine discovers Skills.
type SkillConfig struct {
	Name string `json:"name"`
	// Source locates the Skill's files (a workspace path or a stored bundle id).
	Source string `json:"source"`
}

// PackageConfig is one native package in the engine's own package kinds.
type PackageConfig struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// ValidateAgentConfig checks an Agent's extension configuration against the adapter
// registered for kind and returns a *ValidationError listing every refused value.
func (r *Registry) ValidateAgentConfig(kind string, cfg AgentConfig) error {
	adapter, ok := r.Adapter(kind)
	if !ok {
		return &ValidationError{Subject: "agent configuration", Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("no engine adapter %q is installed", kind)}}}
	}
	return ValidateAgentConfigFor(adapter.Capabilities(), cfg)
}

// ValidateAgentConfigFor checks an Agent's extension configuration against one
// engine's declaration.
func ValidateAgentConfigFor(caps EngineRuntimeCapabilities, cfg AgentConfig) error {
	p := &problems{subject: fmt.Sprintf("agent configuration for engine %q", caps.EngineKind)}
	ext := caps.Extensions
	names := make([]string, len(cfg.MCPServers))
	for i, s := range cfg.MCPServers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		names[i] = s.Name
		if !ext.AcceptsMCPTransport(s.Transport) {
			p.add(field+".transport", "transport %q is not accepted (accepted: %v)", s.Transport, ext.MCPTransports)
			continue
		}
		switch s.Transport {
		case MCPTransportStdio:
			if len(s.Command) == 0 || s.Command[0] == "" {
				p.add(field+".command", "a stdio server needs a command")
			}
			if s.URL != "" {
				p.add(field+".url", "a stdio server takes no url")
			}
		default:
			if s.URL == "" {
				p.add(field+".url", "an %s server needs a url", s.Transport)
			}
			if len(s.Command) > 0 {
				p.add(field+".command", "an %s server takes no command", s.Transport)
			}
		}
	}
	p.checkUnique("mcp_servers.name", names)

	if len(cfg.Skills) > 0 && ext.Skills == nil {
		p.add("skills", "engine %q does not discover Skills", caps.EngineKind)
	}
	skillNames := make([]string, len(cfg.Skills))
	for i, s := range cfg.Skills {
		skillNames[i] = s.Name
		if s.Source == "" {
			p.add(fmt.Sprintf("skills[%d].source", i), "is empty")
		}
	}
	p.checkUnique("skills.name", skillNames)

	for i, pkg := range cfg.Packages {
		field := fmt.Sprintf("packages[%d]", i)
		if !ext.AcceptsPackageKind(pkg.Kind) {
			p.add(field+".kind", "package kind %q is not accepted (accepted: %v)", pkg.Kind, ext.NativePackageKinds)
		}
		if pkg.Name == "" {
			p.add(field+".name", "is empty")
		}
	}

	for _, name := range sortedKeys(cfg.NativeConfig) {
		field := fmt.Sprintf("native_config.%s", name)
		doc, ok := ext.ConfigDocument(name)
		if !ok {
			p.add(field, "engine %q has no native configuration document %q", caps.EngineKind, name)
			continue
		}
		var block map[string]json.RawMessage
		if err := json.Unmarshal(cfg.NativeConfig[name], &block); err != nil || block == nil {
			p.add(field, "is not a JSON object")
			continue
		}
		for _, key := range doc.ProtectedKeys {
			if _, set := block[key]; set {
				p.add(field+"."+key, "is managed by the platform and cannot be set")
			}
		}
	}
	return p.err()
}

// SandboxTenancy is how many conversations a box carries, a RuntimeProfile choice.
type SandboxTenancy string

// The sandbox tenancies.
const (
	// TenancyConversation: each conversation has its own box.
	TenancyConversation SandboxTenancy = "conversation"
	// TenancyShared: one box carries several conversations, each in an isolated session.
	TenancyShared SandboxTenancy = "shared"
)

// TracingConfig is a RuntimeProfile's tracing endpoint.
type TracingConfig struct {
	Enabled  bool   `json:"enabled"`
	Endpoint string `json:"endpoint,omitempty"`
}

// SandboxBackendCapabilities are what the selected sandbox backend declares.
type SandboxBackendCapabilities struct {
	// SupportsProcessSessions: long-lived stdin/stdout process sessions.
	SupportsProcessSessions bool `json:"supports_process_sessions"`
	// SupportsIsolatedSessions: isolated per-conversation sessions in a shared box.
	SupportsIsolatedSessions bool `json:"supports_isolated_sessions"`
}

// RuntimeProfileSpec is what ValidateRuntimeProfile needs from a RuntimeProfile being saved.
type RuntimeProfileSpec struct {
	EngineKind     string                     `json:"engine_kind"`
	RuntimeImage   string                     `json:"runtime_image,omitempty"`
	SandboxTenancy SandboxTenancy             `json:"sandbox_tenancy"`
	Tracing        TracingConfig              `json:"tracing"`
	Backend        SandboxBackendCapabilities `json:"backend"`
}

// ValidateRuntimeProfile checks a RuntimeProfile against the adapter it selects: enabled
// tracing needs an adapter that declares it (a valid disabled tracing configuration may
// stay stored with any adapter); an omitted image needs the adapter's default image;
// shared tenancy needs the backend's isolated sessions and per_conversation_account
// placement; an engine requiring process sessions under conversation tenancy needs a
// backend with process sessions.
func (r *Registry) ValidateRuntimeProfile(spec RuntimeProfileSpec) error {
	adapter, ok := r.Adapter(spec.EngineKind)
	if !ok {
		return &ValidationError{Subject: "runtime profile", Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("no engine adapter %q is installed", spec.EngineKind)}}}
	}
	caps := adapter.Capabilities()
	p := &problems{subject: fmt.Sprintf("runtime profile for engine %q", caps.EngineKind)}
	if spec.Tracing.Enabled {
		if !caps.Extensions.Tracing {
			p.add("tracing.enabled", "engine %q does not send telemetry to a tracing endpoint", caps.EngineKind)
		}
		if spec.Tracing.Endpoint == "" {
			p.add("tracing.endpoint", "enabled tracing needs an endpoint")
		}
	}
	if spec.RuntimeImage == "" && caps.DefaultRuntimeImage == "" {
		p.add("runtime_image", "engine %q has no default runtime image; name one", caps.EngineKind)
	}
	switch spec.SandboxTenancy {
	case TenancyConversation:
		if caps.RequiresProcessSessions && !spec.Backend.SupportsProcessSessions {
			p.add("sandbox_tenancy", "engine %q requires process sessions, which the sandbox backend does not support", caps.EngineKind)
		}
	case TenancyShared:
		if !spec.Backend.SupportsIsolatedSessions {
			p.add("sandbox_tenancy", "shared tenancy requires a sandbox backend with isolated sessions")
		}
		if caps.ConversationPlacement != PlacementPerConversationAccount {
			p.add("sandbox_tenancy", "shared tenancy requires an engine with per_conversation_account placement; %q declares %s", caps.EngineKind, caps.ConversationPlacement)
		}
	default:
		p.add("sandbox_tenancy", "%q is not conversation or shared", spec.SandboxTenancy)
	}
	return p.err()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
