package engines

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
)

// Registry holds the installed engine adapters by engine kind. Build one at start-up,
// register every adapter explicitly, and fail start-up on the first error:
//
//	reg := engines.NewRegistry()
//	if err := reg.Register("claude", claude.NewAdapter(cfg)); err != nil {
//		return fmt.Errorf("install engines: %w", err)
//	}
//
// A Registry is safe for concurrent reads after registration.
type Registry struct {
	mu       sync.RWMutex
	adapters map[string]EngineAdapter
	// programs are the kinds whose RuntimeProfiles define their program
	// (RegisterProgramKind), with the builder of their adapters.
	programs map[string]ProgramBuilder
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{adapters: map[string]EngineAdapter{}, programs: map[string]ProgramBuilder{}}
}

// Register validates an adapter and installs it under name, which must equal its
// engine_kind (the stored identifier that selects it). It returns a *ValidationError
// naming the adapter and every problem when the kind is already registered, the name
// does not match, the declaration is incomplete, a pinned seams API version is not
// SeamsAPIVersion, or the declared runtime client type does not serve the whole
// contract. Nothing is installed on error.
func (r *Registry) Register(name string, adapter EngineAdapter) error {
	if err := ValidateAdapter(name, adapter); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if existing, ok := r.adapters[name]; ok {
		return &ValidationError{
			Subject:  adapterSubject(name, adapter),
			Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("engine kind %q is already registered by %T", name, existing)}},
		}
	}
	if r.taken(name) {
		return &ValidationError{
			Subject:  adapterSubject(name, adapter),
			Problems: []Problem{{Field: "engine_kind", Message: fmt.Sprintf("engine kind %q is already registered as a kind whose RuntimeProfiles define their program", name)}},
		}
	}
	r.adapters[name] = adapter
	return nil
}

// Adapter returns the adapter registered for kind. A kind whose RuntimeProfiles define
// their program has no adapter of its own: ProfileAdapter builds one per profile.
func (r *Registry) Adapter(kind string) (EngineAdapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.adapters[kind]
	return a, ok
}

// Kinds returns the registered engine kinds in order, those whose RuntimeProfiles
// define their program included.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	kinds := make([]string, 0, len(r.adapters)+len(r.programs))
	for k := range r.adapters {
		kinds = append(kinds, k)
	}
	for k := range r.programs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

func adapterSubject(name string, adapter EngineAdapter) string {
	return fmt.Sprintf("engine adapter %q (%T)", name, adapter)
}

// ValidateAdapter runs every registration check on one adapter except the duplicate
// check, which needs a Registry. The conformance suite runs it too.
func ValidateAdapter(name string, adapter EngineAdapter) (err error) {
	p := &problems{subject: adapterSubject(name, adapter)}
	if adapter == nil {
		p.add("", "adapter is nil")
		return p.err()
	}
	// A declaration method that panics (a nil receiver, say) must still fail start-up
	// with the adapter named rather than crash it.
	defer func() {
		if r := recover(); r != nil {
			p.add("", "adapter panicked during validation: %v", r)
			err = p.err()
		}
	}()
	if name == "" {
		p.add("name", "registration name is empty")
	}
	caps := adapter.Capabilities()
	if caps.EngineKind != name {
		p.add("engine_kind", "engine_kind %q does not match the registration name %q", caps.EngineKind, name)
	}
	if v, ok := adapter.(SeamsAPIVersioned); ok && v.SeamsAPIVersion() != SeamsAPIVersion {
		p.add("seams_api_version", "adapter pins seams API version %d, this AstraBox serves %d", v.SeamsAPIVersion(), SeamsAPIVersion)
	}
	checkCapabilities(p, caps)
	if again, _ := json.Marshal(adapter.Capabilities()); !bytes.Equal(mustJSON(caps), again) {
		p.add("capabilities", "Capabilities() returns a different declaration on each call")
	}
	p.addErr("sandbox_request", adapter.SandboxRequest().Validate())
	material := adapter.StartupMaterialRequest()
	p.addErr("startup_material_request", material.Validate())
	if caps.RuntimeStateStore && !material.RuntimeStateStorage {
		p.add("runtime_state_store", "declared, but the startup material request does not ask for runtime state storage")
	}
	p.addErr("engine_client_type", CheckClientType(adapter.EngineClientType(), caps))
	return p.err()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// checkCapabilities reports an incomplete or inconsistent declaration.
func checkCapabilities(p *problems, c EngineRuntimeCapabilities) {
	if c.EngineKind == "" {
		p.add("engine_kind", "is empty")
	}
	if len(c.SupportedSessionKinds) == 0 {
		p.add("supported_session_kinds", "declares no Session kind")
	}
	kinds := make([]string, len(c.SupportedSessionKinds))
	for i, k := range c.SupportedSessionKinds {
		kinds[i] = string(k)
		if k != SessionKindAgentChat && k != SessionKindAssistantChat {
			p.add(fmt.Sprintf("supported_session_kinds[%d]", i), "unknown Session kind %q", k)
		}
	}
	p.checkUnique("supported_session_kinds", kinds)

	w := c.Workload
	if w.ConfigDirName == "" {
		p.add("workload.config_dir_name", "is empty")
	}
	if w.ConfigDirEnv == "" {
		p.add("workload.config_dir_env", "is empty")
	}
	if len(w.RequiredCommands) == 0 {
		p.add("workload.required_commands", "names no command; the engine's own command is required")
	}
	p.checkUnique("workload.required_commands", w.RequiredCommands)

	switch c.ConversationPlacement {
	case PlacementPerConversationAccount, PlacementBoxAccount:
	default:
		p.add("conversation_placement", "%q is not per_conversation_account or box_account", c.ConversationPlacement)
	}

	p.checkUnique("permission_modes", c.PermissionModes)
	for kind, mode := range c.PermissionModeDefaults {
		field := fmt.Sprintf("permission_mode_defaults.%s", kind)
		if !c.SupportsSessionKind(kind) {
			p.add(field, "Session kind %q is not supported", kind)
		}
		if !c.HasPermissionMode(mode) {
			p.add(field, "default %q is not a declared permission mode", mode)
		}
	}
	if len(c.PermissionModes) > 0 {
		for _, kind := range c.SupportedSessionKinds {
			if _, ok := c.PermissionModeDefaults[kind]; !ok {
				p.add(fmt.Sprintf("permission_mode_defaults.%s", kind), "has no default permission mode")
			}
		}
	}

	checkExtensions(p, c.Extensions)

	if c.SessionLog != nil && c.SessionLog.PathPattern == "" {
		p.add("session_log.path_pattern", "is empty")
	}
	switch c.RuntimeStateScope {
	case "", RuntimeStateScopeWorkspace, RuntimeStateScopeSession:
	default:
		p.add("runtime_state_scope", "%q is not workspace or session", c.RuntimeStateScope)
	}
	if c.RuntimeStateScope == RuntimeStateScopeSession && !c.RuntimeStateStore && c.SessionLog == nil {
		p.add("runtime_state_scope", "session scope declared without runtime_state_store or session_log")
	}
}

func checkExtensions(p *problems, e EngineExtensions) {
	transports := make([]string, len(e.MCPTransports))
	for i, t := range e.MCPTransports {
		transports[i] = string(t)
		switch t {
		case MCPTransportStdio, MCPTransportHTTP, MCPTransportSSE:
		default:
			p.add(fmt.Sprintf("extensions.mcp_transports[%d]", i), "unknown MCP transport %q", t)
		}
	}
	p.checkUnique("extensions.mcp_transports", transports)
	if e.Skills != nil {
		if len(e.Skills.Directories) == 0 {
			p.add("extensions.skills.directories", "Skills discovery declared without a directory")
		}
		p.checkUnique("extensions.skills.directories", e.Skills.Directories)
	}
	p.checkUnique("extensions.native_package_kinds", e.NativePackageKinds)
	names := make([]string, len(e.NativeConfigDocuments))
	for i, d := range e.NativeConfigDocuments {
		names[i] = d.Name
		p.checkUnique(fmt.Sprintf("extensions.native_config_documents[%d].protected_keys", i), d.ProtectedKeys)
	}
	p.checkUnique("extensions.native_config_documents", names)
	if f := e.InstructionsFile; f != "" && (path.IsAbs(f) || path.Clean(f) != f || strings.HasPrefix(f, "..")) {
		p.add("extensions.instructions_file", "%q must be a clean path relative to the configuration directory", f)
	}
}
