package engines

import "strings"

// SeamsAPIVersion is the version of this extension interface. An adapter that pins
// another version through SeamsAPIVersioned fails registration with the mismatch.
const SeamsAPIVersion = 7

// SessionKind is an AstraBox Session kind an engine can drive.
type SessionKind string

// The Session kinds an engine may declare in SupportedSessionKinds.
const (
	// SessionKindAgentChat is a conversation with an Agent.
	SessionKindAgentChat SessionKind = "agent_chat"
	// SessionKindAssistantChat is a conversation with a person's Assistant.
	SessionKindAssistantChat SessionKind = "assistant_chat"
)

// ConversationPlacement says which account the engine's process runs as in a box.
type ConversationPlacement string

// The conversation placements.
const (
	// PlacementPerConversationAccount: the engine's process runs as the conversation's own
	// account. Shared sandbox tenancy requires it.
	PlacementPerConversationAccount ConversationPlacement = "per_conversation_account"
	// PlacementBoxAccount: the integration still drives one box-scoped service.
	PlacementBoxAccount ConversationPlacement = "box_account"
)

// RuntimeStateScope says what owns an engine's native runtime state.
type RuntimeStateScope string

// The runtime state scopes.
const (
	// RuntimeStateScopeWorkspace binds the native state to the Agent or Assistant
	// workspace. It is the default.
	RuntimeStateScopeWorkspace RuntimeStateScope = "workspace"
	// RuntimeStateScopeSession binds the native state to one Session's isolated account.
	RuntimeStateScopeSession RuntimeStateScope = "session"
)

// EngineRuntimeCapabilities is an adapter's declaration of its runtime. Registration
// validates it (see Registry.Register) before the engine appears in any product catalog.
type EngineRuntimeCapabilities struct {
	// EngineKind is the stable stored identifier that selects this adapter.
	EngineKind string `json:"engine_kind"`
	// SupportedSessionKinds are the AstraBox Session kinds the engine drives.
	SupportedSessionKinds []SessionKind `json:"supported_session_kinds"`
	// Workload holds the engine's own workload facts.
	Workload EngineWorkloadDeclaration `json:"workload"`
	// ConversationPlacement says which account the engine's process runs as.
	ConversationPlacement ConversationPlacement `json:"conversation_placement"`
	// DefaultRuntimeImage is used when a RuntimeProfile omits its image; empty means a
	// RuntimeProfile must name one.
	DefaultRuntimeImage string `json:"default_runtime_image,omitempty"`
	// PermissionModes are the engine's permission modes in its own vocabulary (for
	// Claude Code: default, acceptEdits, plan, bypassPermissions...). Empty when the
	// engine has none; an engine must not invent modes to fit a common interface.
	PermissionModes []string `json:"permission_modes"`
	// PermissionModeDefaults is the mode a new Session of each kind starts with. Every
	// value must be one of PermissionModes, every key one of SupportedSessionKinds.
	PermissionModeDefaults map[SessionKind]string `json:"permission_mode_defaults"`
	// Extensions declares which author-configured extensions the engine accepts.
	Extensions EngineExtensions `json:"extensions"`
	// SessionLog, when set, asks AstraBox to preserve the engine's native JSONL
	// conversation log outside a replaceable sandbox and restore it before reconnect.
	SessionLog *SessionLogDeclaration `json:"session_log,omitempty"`
	// RuntimeStateStore asks for native runtime-state storage, for engines whose native
	// state is not a JSONL log; the adapter supplies the save/restore integration.
	RuntimeStateStore bool `json:"runtime_state_store"`
	// RuntimeStateScope binds the native state to the workspace (default) or to one
	// Session's isolated account. Empty reads as workspace.
	RuntimeStateScope RuntimeStateScope `json:"runtime_state_scope,omitempty"`
	// RequiresProcessSessions is true when, in a conversation's own box, the engine runs
	// as one of the box's long-lived processes driven over stdin and stdout
	// (Box.StartProcess). A RuntimeProfile pairing the engine with conversation tenancy is
	// then refused on a sandbox backend that does not support process sessions.
	RequiresProcessSessions bool `json:"requires_process_sessions"`
	// SupportsServerInfo says the runtime client implements ServerInfoProvider.
	SupportsServerInfo bool `json:"supports_server_info"`
	// SupportsChildRunStop says the runtime client implements ChildRunStopper.
	SupportsChildRunStop bool `json:"supports_child_run_stop"`
}

// EngineWorkloadDeclaration holds the engine's workload facts the platform needs to
// compose a runtime identity and check an image.
type EngineWorkloadDeclaration struct {
	// ConfigDirName is the name of the engine's configuration directory under the
	// runtime home, e.g. ".claude".
	ConfigDirName string `json:"config_dir_name"`
	// ConfigDirEnv is the environment variable that names that directory, e.g.
	// CLAUDE_CONFIG_DIR, CODEX_HOME or PI_CODING_AGENT_DIR.
	ConfigDirEnv string `json:"config_dir_env"`
	// RequiredCommands are the commands the engine's own path needs in the image. A
	// missing one fails startup before a Session accepts input, so optional developer
	// tools do not belong here.
	RequiredCommands []string `json:"required_commands"`
}

// SessionLogDeclaration describes a native JSONL conversation log. AstraBox mirrors its
// JSON entries in order, without interpreting them, and restores them into a
// replacement sandbox before reconnect; whitespace need not be byte-identical.
type SessionLogDeclaration struct {
	// PathPattern locates the log relative to the engine's configuration directory. It
	// may use the placeholders {engine_session_key} and {engine_session_key_8} (its
	// first 8 characters, for a program that names its log so) and shell-style globs,
	// e.g. "projects/*/{engine_session_key}.jsonl".
	PathPattern string `json:"path_pattern"`
}

// SessionLogKeyPlaceholder is the placeholder SessionLogDeclaration.PathPattern may use
// for the vendor's conversation id.
const SessionLogKeyPlaceholder = "{engine_session_key}"

// SessionLogShortKeyPlaceholder stands for the first 8 characters of the vendor's
// conversation id (Gemini CLI names its chat file session-<minute>-<first 8>.jsonl).
const SessionLogShortKeyPlaceholder = "{engine_session_key_8}"

// SessionLogPath is a session log's path pattern with the conversation id key in
// place of the placeholders.
func SessionLogPath(pattern, key string) string {
	return strings.NewReplacer(SessionLogKeyPlaceholder, key, SessionLogShortKeyPlaceholder, key[:min(len(key), 8)]).Replace(pattern)
}

// SupportsSessionKind reports whether the engine drives the given Session kind.
func (c EngineRuntimeCapabilities) SupportsSessionKind(kind SessionKind) bool {
	for _, k := range c.SupportedSessionKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// HasPermissionMode reports whether mode is one of the declared permission modes.
func (c EngineRuntimeCapabilities) HasPermissionMode(mode string) bool {
	for _, m := range c.PermissionModes {
		if m == mode {
			return true
		}
	}
	return false
}

// EffectiveRuntimeStateScope returns RuntimeStateScope with the documented default.
func (c EngineRuntimeCapabilities) EffectiveRuntimeStateScope() RuntimeStateScope {
	if c.RuntimeStateScope == "" {
		return RuntimeStateScopeWorkspace
	}
	return c.RuntimeStateScope
}
