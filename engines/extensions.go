package engines

import "encoding/json"

// MCPTransport is an MCP server transport an author may configure on an Agent.
type MCPTransport string

// The MCP transports.
const (
	// MCPTransportStdio starts the MCP server as a process in the box.
	MCPTransportStdio MCPTransport = "stdio"
	// MCPTransportHTTP reaches the MCP server over streamable HTTP.
	MCPTransportHTTP MCPTransport = "http"
	// MCPTransportSSE reaches the MCP server over the legacy HTTP+SSE transport.
	MCPTransportSSE MCPTransport = "sse"
)

// EngineExtensions declares which author-configured extensions the engine accepts.
// Saving an Agent rejects any configured value these declarations do not accept
// (ValidateAgentConfig) instead of storing it as an inert setting.
type EngineExtensions struct {
	// MCPTransports are the MCP transports the engine accepts; empty means no MCP servers.
	MCPTransports []MCPTransport `json:"mcp_transports"`
	// Skills says where the engine discovers Skills; nil means it has no Skills.
	Skills *SkillsDiscovery `json:"skills,omitempty"`
	// NativePackageKinds are the kinds of native package the engine installs, in its own
	// words (e.g. "plugin"); empty means none.
	NativePackageKinds []string `json:"native_package_kinds"`
	// NativeConfigDocuments are the engine's native configuration documents an author may
	// set, such as a settings.json object.
	NativeConfigDocuments []NativeConfigDocument `json:"native_config_documents"`
	// InstructionsFile is the file, relative to the engine's configuration directory,
	// where it reads standing instructions (e.g. "AGENTS.md"); empty means the engine
	// takes no Agent instructions.
	InstructionsFile string `json:"instructions_file,omitempty"`
	// Tracing says the engine sends telemetry to a RuntimeProfile's tracing endpoint.
	Tracing bool `json:"tracing"`
}

// SkillsDiscovery says where an engine discovers Skills.
type SkillsDiscovery struct {
	// Directories are the directories the engine scans, relative to its configuration
	// directory (e.g. "skills"); AstraBox places configured Skills there.
	Directories []string `json:"directories"`
}

// NativeConfigDocument is one native configuration document: a JSON object block whose
// ProtectedKeys name the top-level fields the platform manages (an author may not set them).
type NativeConfigDocument struct {
	// Name identifies the document in the engine's own words, e.g. "settings.json" or
	// "config.toml".
	Name string `json:"name"`
	// ProtectedKeys are top-level fields the platform manages.
	ProtectedKeys []string `json:"protected_keys"`
}

// Protects reports whether key is one of the document's protected top-level keys.
func (d NativeConfigDocument) Protects(key string) bool {
	for _, k := range d.ProtectedKeys {
		if k == key {
			return true
		}
	}
	return false
}

// Unprotected returns the author's block of the document without any protected key.
// Saving an Agent refuses protected keys; adapters still drop them when they write the
// document, so a value stored before a key became protected never overrides the
// platform.
func (d NativeConfigDocument) Unprotected(block map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(block))
	for k, v := range block {
		if !d.Protects(k) {
			out[k] = v
		}
	}
	return out
}

// AcceptsMCPTransport reports whether t is a declared MCP transport.
func (e EngineExtensions) AcceptsMCPTransport(t MCPTransport) bool {
	for _, have := range e.MCPTransports {
		if have == t {
			return true
		}
	}
	return false
}

// AcceptsPackageKind reports whether kind is a declared native package kind.
func (e EngineExtensions) AcceptsPackageKind(kind string) bool {
	for _, have := range e.NativePackageKinds {
		if have == kind {
			return true
		}
	}
	return false
}

// ConfigDocument returns the declared native configuration document with this name.
func (e EngineExtensions) ConfigDocument(name string) (NativeConfigDocument, bool) {
	for _, d := range e.NativeConfigDocuments {
		if d.Name == name {
			return d, true
		}
	}
	return NativeConfigDocument{}, false
}
