package engines

import (
	"encoding/json"
	"errors"
	"fmt"
)

// AttachMode says how ActivateRuntime must reach an existing conversation.
type AttachMode string

// The attach modes. The zero value means a new Session: start a new conversation.
const (
	// AttachReconnect: the same sandbox is alive and the program may still run; connect
	// to the Session's existing conversation (a lost connection is not a lost sandbox).
	AttachReconnect AttachMode = "reconnect"
	// AttachRestore: AstraBox replaced the compute, re-adopted or created the sandbox,
	// restored the native session data and refreshed workspace and credentials; resume
	// the Session's exact native conversation.
	AttachRestore AttachMode = "restore"
)

// EngineStartupContext is the platform-prepared context ActivateRuntime works in.
// Secrets and callback credentials are left out of its JSON encoding so they never reach
// workflow histories, recordings or logs: the process that calls ActivateRuntime
// resolves them into the value it passes.
type EngineStartupContext struct {
	// SessionID is the AstraBox Session id. It also namespaces public child-run ids.
	SessionID string `json:"session_id"`
	// SessionKind is the Session's kind.
	SessionKind SessionKind `json:"session_kind"`
	// SandboxID identifies the prepared box.
	SandboxID string `json:"sandbox_id"`
	// AttachMode is empty for a new Session, otherwise how to reach its conversation.
	AttachMode AttachMode `json:"attach_mode,omitempty"`
	// ResumeSessionKey is the vendor conversation id to resume; set with AttachMode.
	ResumeSessionKey string `json:"resume_session_key,omitempty"`
	// ResumeMaterial is the SessionRuntime.ResumeMaterial saved from an earlier
	// activation, if any.
	ResumeMaterial json.RawMessage `json:"resume_material,omitempty"`
	// ConversationEmpty is set with AttachMode when the platform holds no evidence that
	// the conversation ever had content: the runtime admitted none of the Session's
	// inputs and the declared session log has no mirrored entry. A program that writes
	// its native state only at its first turn has then nothing to resume, and the
	// adapter may start the same conversation (ResumeSessionKey) afresh. Unset, missing
	// native state means the conversation was lost: activation must fail rather than
	// bind the Session to an empty conversation.
	ConversationEmpty bool `json:"conversation_empty,omitempty"`
	// RuntimeIdentity is the account and paths the program runs with, composed by the
	// platform per sandbox tenancy and Session kind. Nil addresses the box itself.
	RuntimeIdentity *RuntimeIdentity `json:"runtime_identity,omitempty"`
	// Secrets are the named platform secrets the StartupMaterialRequest asked for,
	// resolved. Never log them.
	Secrets map[string]string `json:"-"`
	// CallbackCredentials are scoped credentials for the platform callbacks the
	// StartupMaterialRequest asked for. The adapter consumes them; it never issues
	// platform credentials itself.
	CallbackCredentials []ScopedCallbackCredential `json:"-"`
	// PermissionMode is the Session's stored permission mode, in the engine's vocabulary;
	// empty when the engine declares none.
	PermissionMode string `json:"permission_mode,omitempty"`
	// AgentConfig is the Agent's extension configuration, validated against the
	// adapter's EngineExtensions when it was saved and resolved: its secret values (MCP
	// server env and headers) are in place. The adapter turns it into the program's own
	// files before the program starts. It is left out of the JSON encoding for its
	// secrets.
	AgentConfig AgentConfig `json:"-"`
	// TracingEndpoint is the OTLP/HTTP base URL, inside the box, where the program sends
	// its telemetry (the export paths /v1/traces, /v1/metrics and /v1/logs follow it):
	// the box's forward to the RuntimeProfile's tracing endpoint. Set only for an adapter
	// that declares Extensions.Tracing, when the profile enables tracing; empty, the
	// program sends no telemetry.
	TracingEndpoint string `json:"tracing_endpoint,omitempty"`
}

// RuntimeIdentity is the runtime account and its resolved paths. Use these paths instead
// of assuming /root, /home or a fixed uid.
type RuntimeIdentity struct {
	// Account is the account name the program runs as.
	Account string `json:"account"`
	// UID and GID are the account's numeric ids.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// HomeDir is the account's home directory.
	HomeDir string `json:"home_dir"`
	// WorkspaceDir is the working directory of the conversation.
	WorkspaceDir string `json:"workspace_dir"`
	// SourceDir holds checked-out sources.
	SourceDir string `json:"source_dir"`
	// FileRoot is the root of files exchanged with the person.
	FileRoot string `json:"file_root"`
	// CacheDir and TempDir are the account's cache and temporary directories.
	CacheDir string `json:"cache_dir"`
	TempDir  string `json:"temp_dir"`
}

// Validate reports an incomplete identity. An incomplete supplied identity is refused
// before any write, while a nil identity explicitly addresses the box filesystem.
func (id RuntimeIdentity) Validate() error {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"account", id.Account}, {"home_dir", id.HomeDir}, {"workspace_dir", id.WorkspaceDir},
		{"source_dir", id.SourceDir}, {"file_root", id.FileRoot},
		{"cache_dir", id.CacheDir}, {"temp_dir", id.TempDir},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if id.UID < 0 || id.GID < 0 {
		missing = append(missing, "uid/gid")
	}
	if len(missing) > 0 {
		return fmt.Errorf("incomplete runtime identity: missing %v", missing)
	}
	return nil
}

// CallbackScope names what a scoped callback credential may call.
type CallbackScope string

// The callback scopes an EngineStartupMaterialRequest can ask for.
const (
	// CallbackRuntimeStateStorage saves and restores native runtime state.
	CallbackRuntimeStateStorage CallbackScope = "runtime_state_storage"
)

// ScopedCallbackCredential is the platform material of one callback scope: the owner
// the platform issued and the capability bound to it. The adapter runs in the
// platform's worker, so the capability is a handle it calls, not an address and token
// it could hand on or mint: it reaches the owner's material and nothing else. Engines
// forward Owner unchanged (for example into a vendor's own receipt).
type ScopedCallbackCredential struct {
	Scope CallbackScope `json:"scope"`
	// Owner identifies what the stored material belongs to: "workspace:<agent id>" or
	// "session:<session id>", as the engine's RuntimeStateScope declares.
	Owner string `json:"owner"`
	// RuntimeState is the CallbackRuntimeStateStorage capability.
	RuntimeState RuntimeStateStorage `json:"-"`
}

// CallbackCredential returns the credential for scope, if the platform supplied one.
func (sc EngineStartupContext) CallbackCredential(scope CallbackScope) (ScopedCallbackCredential, bool) {
	for _, c := range sc.CallbackCredentials {
		if c.Scope == scope {
			return c, true
		}
	}
	return ScopedCallbackCredential{}, false
}

// EngineStartupMaterialRequest is the platform material an adapter asks for. The
// platform keeps a JSONL transcript itself (SessionLogDeclaration) and learns of a
// sandbox's death itself (it alone replaces sandboxes), so neither is material an
// adapter asks for.
type EngineStartupMaterialRequest struct {
	// RuntimeStateStorage asks for native runtime-state storage: a
	// CallbackRuntimeStateStorage credential in EngineStartupContext.CallbackCredentials.
	// An engine declaring RuntimeStateStore must ask for it.
	RuntimeStateStorage bool `json:"runtime_state_storage"`
	// Secrets names platform secrets to resolve into EngineStartupContext.Secrets.
	Secrets []string `json:"secrets"`
}

// Scopes returns the callback scopes this request implies.
func (r EngineStartupMaterialRequest) Scopes() []CallbackScope {
	var out []CallbackScope
	if r.RuntimeStateStorage {
		out = append(out, CallbackRuntimeStateStorage)
	}
	return out
}

// Validate checks the request: secret names are nonempty and unique.
func (r EngineStartupMaterialRequest) Validate() error {
	seen := map[string]bool{}
	for _, s := range r.Secrets {
		if s == "" {
			return errors.New("empty secret name")
		}
		if seen[s] {
			return fmt.Errorf("secret %q requested twice", s)
		}
		seen[s] = true
	}
	return nil
}
