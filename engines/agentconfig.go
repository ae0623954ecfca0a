package engines

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
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
	// Instructions are standing instructions for every conversation of the Agent,
	// written to the engine's own instructions file (EngineExtensions.InstructionsFile,
	// such as AGENTS.md or CLAUDE.md).
	Instructions string `json:"instructions,omitempty"`
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

// SkillConfig is one Skill to place where the engine discovers Skills: the platform
// writes it as <skills directory>/<name>/SKILL.md (SkillDocument).
type SkillConfig struct {
	// Name is the Skill's name and folder: lower-case letters, digits and hyphens.
	Name string `json:"name"`
	// Description tells the program when to use the Skill; programs list it.
	Description string `json:"description"`
	// Instructions are the body of SKILL.md, in Markdown.
	Instructions string `json:"instructions"`
}

// SkillDocument is the SKILL.md of a Skill: front matter with its name and
// description, then its instructions, the form every Skills-aware program reads.
func SkillDocument(s SkillConfig) []byte {
	desc, _ := json.Marshal(s.Description)
	return []byte("---\nname: " + s.Name + "\ndescription: " + string(desc) + "\n---\n\n" + s.Instructions + "\n")
}

// Name patterns: an MCP server's name becomes a key in the program's own
// configuration (a TOML table name, a JSON key, a tool-name prefix), and a Skill's
// name becomes a folder, so both are kept to characters every program accepts.
var (
	mcpServerNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	skillNamePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
)

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
	return ValidateAgentConfigOf(adapter, cfg)
}

// ValidateAgentConfigOf checks an Agent's extension configuration against one adapter
// (a RuntimeProfile's, from Registry.ProfileAdapter): its declaration and its own
// AgentConfigChecker.
func ValidateAgentConfigOf(adapter EngineAdapter, cfg AgentConfig) error {
	p := checkAgentConfig(adapter.Capabilities(), cfg)
	if checker, ok := adapter.(AgentConfigChecker); ok {
		p.list = append(p.list, checker.CheckAgentConfig(cfg)...)
	}
	return p.err()
}

// AgentConfigChecker is implemented by an adapter whose program needs more of an
// Agent's configuration than EngineExtensions can declare, such as a native document
// block its file format cannot hold. ValidateAgentConfig adds its problems, so such a
// value is refused on save instead of failing the program's start.
type AgentConfigChecker interface {
	// CheckAgentConfig returns the problems of a configuration that passed the
	// declaration's checks, with fields named as in AgentConfig's JSON.
	CheckAgentConfig(cfg AgentConfig) []Problem
}

// ValidateAgentConfigFor checks an Agent's extension configuration against one
// engine's declaration.
func ValidateAgentConfigFor(caps EngineRuntimeCapabilities, cfg AgentConfig) error {
	return checkAgentConfig(caps, cfg).err()
}

func checkAgentConfig(caps EngineRuntimeCapabilities, cfg AgentConfig) *problems {
	p := &problems{subject: fmt.Sprintf("agent configuration for engine %q", caps.EngineKind)}
	ext := caps.Extensions
	names := make([]string, len(cfg.MCPServers))
	for i, s := range cfg.MCPServers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		names[i] = s.Name
		if s.Name != "" && !mcpServerNamePattern.MatchString(s.Name) {
			p.add(field+".name", "%q must be 1-64 letters, digits, '_' or '-', starting with a letter or digit", s.Name)
		}
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
		field := fmt.Sprintf("skills[%d]", i)
		skillNames[i] = s.Name
		if s.Name != "" && !skillNamePattern.MatchString(s.Name) {
			p.add(field+".name", "%q must be 1-64 lower-case letters, digits or '-', starting with a letter or digit", s.Name)
		}
		if s.Description == "" {
			p.add(field+".description", "is empty: programs list a Skill by its description")
		}
		if s.Instructions == "" {
			p.add(field+".instructions", "is empty")
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

	if cfg.Instructions != "" && ext.InstructionsFile == "" {
		p.add("instructions", "engine %q reads no instructions file", caps.EngineKind)
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
		for _, key := range sortedKeys(block) {
			if doc.Protects(key) {
				p.add(field+"."+key, "is managed by the platform and cannot be set (protected keys: %v)", doc.ProtectedKeys)
			}
		}
	}
	return p
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

// otlpBaseURL reports whether endpoint is a URL a box's tracing forward can lead to:
// the programs append the OTLP export paths (/v1/traces, ...) to it.
func otlpBaseURL(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		u.RawQuery == "" && u.Fragment == ""
}

// SandboxBackendCapabilities are what the selected sandbox backend declares.
type SandboxBackendCapabilities struct {
	// SupportsProcessSessions: long-lived stdin/stdout process sessions.
	SupportsProcessSessions bool `json:"supports_process_sessions"`
	// SupportsIsolatedSessions: isolated per-conversation sessions in a shared box.
	SupportsIsolatedSessions bool `json:"supports_isolated_sessions"`
	// RunsImageReferences: the backend pulls OCI image references (OpenSandbox,
	// Kubernetes) and cannot run an image directory of the worker's machine.
	RunsImageReferences bool `json:"runs_image_references"`
	// RunsHostSystem: a box without an image runs on the worker machine's own system
	// folders, with the platform's program installs bound into it (the local backend),
	// so a RuntimeProfile may omit its image.
	RunsHostSystem bool `json:"runs_host_system"`
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
// stay stored with any adapter); an omitted image needs the adapter's default image or
// a backend that runs boxes on the host system; a backend that pulls images needs an
// image reference, not a directory;
// shared tenancy needs the backend's isolated sessions and per_conversation_account
// placement; an engine requiring process sessions under conversation tenancy needs a
// backend with process sessions.
func (r *Registry) ValidateRuntimeProfile(spec RuntimeProfileSpec) error {
	adapter, ok := r.Adapter(spec.EngineKind)
	if !ok {
		return &ValidationError{Subject: "runtime profile", Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("no engine adapter %q is installed", spec.EngineKind)}}}
	}
	return ValidateRuntimeProfileOf(adapter, spec)
}

// ValidateRuntimeProfileOf checks a RuntimeProfile against the adapter that runs it
// (from Registry.ProfileAdapter, for a profile that defines its own program), as
// ValidateRuntimeProfile does.
func ValidateRuntimeProfileOf(adapter EngineAdapter, spec RuntimeProfileSpec) error {
	caps := adapter.Capabilities()
	p := &problems{subject: fmt.Sprintf("runtime profile for engine %q", caps.EngineKind)}
	if spec.Tracing.Enabled {
		if !caps.Extensions.Tracing {
			p.add("tracing.enabled", "engine %q does not send telemetry to a tracing endpoint", caps.EngineKind)
		}
		if spec.Tracing.Endpoint == "" {
			p.add("tracing.endpoint", "enabled tracing needs an endpoint")
		} else if !otlpBaseURL(spec.Tracing.Endpoint) {
			p.add("tracing.endpoint", "%q is not an OTLP/HTTP base URL (http or https, a host, an optional path; no credentials, query or fragment)", spec.Tracing.Endpoint)
		}
	}
	if spec.RuntimeImage == "" && caps.DefaultRuntimeImage == "" && !spec.Backend.RunsHostSystem {
		p.add("runtime_image", "engine %q has no default runtime image; name one", caps.EngineKind)
	}
	if image := cmp.Or(spec.RuntimeImage, caps.DefaultRuntimeImage); spec.Backend.RunsImageReferences && strings.HasPrefix(image, "/") {
		p.add("runtime_image", "the sandbox backend pulls OCI images; %q is an image directory: name an image reference such as registry.example.com/astrabox/claude:2.1", image)
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
