package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/astrabox/astrabox/engines"
)

// EngineKind is the Codex CLI's engine_kind.
const EngineKind = "codex"

// ConfigDirName and ConfigDirEnv are where Codex keeps its state and the variable that
// moves it; the platform composes the directory under the runtime home.
const (
	ConfigDirName = ".codex"
	ConfigDirEnv  = "CODEX_HOME"
)

// ApprovalPolicies are Codex 0.169.0's approval policies as strings, in its own words
// (AskForApproval). In a box Codex runs danger-full-access under the external sandbox,
// where only untrusted makes it ask for commands. GranularApprovalPolicies lists the
// policy's object form.
var ApprovalPolicies = []string{"untrusted", "on-request", "never"}

// GranularPolicy is the object form of Codex's AskForApproval,
// {"granular":{...}}: each flag says whether Codex may ask the person for that kind
// of approval (false: Codex rejects such a request itself). Its fields are Codex's,
// in the order its schema declares them.
type GranularPolicy struct {
	SandboxApproval    bool `json:"sandbox_approval"`
	Rules              bool `json:"rules"`
	SkillApproval      bool `json:"skill_approval"`
	RequestPermissions bool `json:"request_permissions"`
	MCPElicitations    bool `json:"mcp_elicitations"`
}

// Mode is the permission mode naming the policy: its JSON exactly as Codex's
// app-server takes it, keys in the schema's order.
func (g GranularPolicy) Mode() string {
	b, _ := json.Marshal(map[string]GranularPolicy{"granular": g}) // booleans always marshal
	return string(b)
}

// GranularApprovalPolicies are the 32 granular policies as permission modes, every
// combination of Codex's five flags, all false first.
func GranularApprovalPolicies() []string {
	modes := make([]string, 0, 32)
	for bits := range 32 {
		modes = append(modes, GranularPolicy{
			SandboxApproval: bits&16 != 0, Rules: bits&8 != 0, SkillApproval: bits&4 != 0,
			RequestPermissions: bits&2 != 0, MCPElicitations: bits&1 != 0,
		}.Mode())
	}
	return modes
}

// approvalPolicyParam is a permission mode as the app-server's approvalPolicy field: a
// policy string, or the granular object.
func approvalPolicyParam(mode string) any {
	if strings.HasPrefix(mode, "{") {
		return json.RawMessage(mode)
	}
	return mode
}

// DefaultApprovalPolicy is Codex's own default policy.
const DefaultApprovalPolicy = "on-request"

// ModelKeyEnv is the variable the box holds the (placeholder) model key in; Codex sends
// it as a bearer token to the model forward, whose host side adds the real credential.
const ModelKeyEnv = "OPENAI_API_KEY"

// Config configures the adapter.
type Config struct {
	// Command is the app-server's argv prefix in the box; default ["codex"]. The
	// adapter appends "app-server".
	Command []string
	// PathDirs go first on PATH (the release's bundled rg).
	PathDirs []string
	// ModelBaseURL is the Responses API base URL (ending in /v1) Codex reaches the
	// model through from inside the box: the box's model forward.
	ModelBaseURL string
	// Model is the model slug; empty leaves Codex's default.
	Model string
	// Features are Codex features the platform turns on in every box ([features] in
	// config.toml; plugins stay off whatever it says), e.g.
	// default_mode_request_user_input, with which Codex 0.169.0 offers the model its
	// request_user_input tool outside Plan mode.
	Features []string
	// Env is added to Codex's environment.
	Env map[string]string
	// DefaultRuntimeImage is used when a RuntimeProfile names no image.
	DefaultRuntimeImage string
	// WorkspaceDir and HomeDir are used when the startup context carries no runtime
	// identity (the box account); defaults /workspace and /workspace/.home.
	WorkspaceDir string
	HomeDir      string
}

// Adapter is the Codex CLI engine adapter.
type Adapter struct {
	cfg Config
}

var (
	_ engines.EngineAdapter      = (*Adapter)(nil)
	_ engines.SeamsAPIVersioned  = (*Adapter)(nil)
	_ engines.AgentConfigChecker = (*Adapter)(nil)
)

// NewAdapter returns the adapter.
func NewAdapter(cfg Config) *Adapter {
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"codex"}
	}
	if cfg.WorkspaceDir == "" {
		cfg.WorkspaceDir = "/workspace"
	}
	if cfg.HomeDir == "" {
		cfg.HomeDir = path.Join(cfg.WorkspaceDir, ".home")
	}
	return &Adapter{cfg: cfg}
}

// SeamsAPIVersion implements engines.SeamsAPIVersioned.
func (a *Adapter) SeamsAPIVersion() int { return engines.SeamsAPIVersion }

// Capabilities implements engines.EngineAdapter.
func (a *Adapter) Capabilities() engines.EngineRuntimeCapabilities {
	return engines.EngineRuntimeCapabilities{
		EngineKind:            EngineKind,
		SupportedSessionKinds: []engines.SessionKind{engines.SessionKindAgentChat, engines.SessionKindAssistantChat},
		Workload: engines.EngineWorkloadDeclaration{
			ConfigDirName: ConfigDirName, ConfigDirEnv: ConfigDirEnv, RequiredCommands: []string{a.cfg.Command[0]},
		},
		ConversationPlacement: engines.PlacementPerConversationAccount,
		DefaultRuntimeImage:   a.cfg.DefaultRuntimeImage,
		PermissionModes:       append(append([]string{}, ApprovalPolicies...), GranularApprovalPolicies()...),
		PermissionModeDefaults: map[engines.SessionKind]string{
			engines.SessionKindAgentChat: DefaultApprovalPolicy, engines.SessionKindAssistantChat: DefaultApprovalPolicy,
		},
		Extensions:              extensions(),
		SessionLog:              &engines.SessionLogDeclaration{PathPattern: RolloutPattern},
		RequiresProcessSessions: true,
		SupportsServerInfo:      true,
	}
}

// EngineClientType implements engines.EngineAdapter.
func (a *Adapter) EngineClientType() reflect.Type { return reflect.TypeFor[*Client]() }

// SandboxRequest implements engines.EngineAdapter. Codex reads its key from the
// environment (the provider's env_key); the base URL is in the config.toml the adapter
// writes, pointing at the box's model forward.
func (a *Adapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: ModelKeyEnv},
		WorkingDirectoryVariable: "ASTRABOX_WORKSPACE",
		Environment:              map[string]string{},
	}
}

// StartupMaterialRequest implements engines.EngineAdapter: the rollout is declared as a
// session log, which the platform mirrors itself; nothing else is needed.
func (a *Adapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{Secrets: []string{}}
}

// resumeMaterial is what the platform saves with the Session and hands back on attach:
// the process session that runs the thread and the thread's rollout file.
type resumeMaterial struct {
	Process string `json:"process"`
	Rollout string `json:"rollout"`
}

// Paths are the runtime-visible directories one conversation uses.
type Paths struct {
	CodexHome, WorkDir, HomeDir string
}

// PathsFor resolves the directories for a startup context: from its runtime identity,
// or the adapter's defaults for the box account.
func (a *Adapter) PathsFor(sc engines.EngineStartupContext) Paths {
	if id := sc.RuntimeIdentity; id != nil {
		return Paths{CodexHome: path.Join(id.HomeDir, ConfigDirName), WorkDir: id.WorkspaceDir, HomeDir: id.HomeDir}
	}
	return Paths{CodexHome: path.Join(a.cfg.HomeDir, ConfigDirName), WorkDir: a.cfg.WorkspaceDir, HomeDir: a.cfg.HomeDir}
}

// ActivateRuntime implements engines.EngineAdapter. A new Session starts an app-server
// and a thread; an attach reconnects to the running app-server named in the resume
// material, or, when it is gone (or the box is new, the platform having restored the
// rollout), starts a new app-server and resumes exactly the Session's thread.
func (a *Adapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	paths := a.PathsFor(sc)
	attach := sc.AttachMode != ""
	if attach && sc.ResumeSessionKey == "" {
		return engines.SessionRuntime{}, errors.New("activate codex: attach without a thread id")
	}
	if a.cfg.ModelBaseURL == "" {
		return engines.SessionRuntime{}, errors.New("activate codex: no model base URL is configured (Config.ModelBaseURL)")
	}
	policy := sc.PermissionMode
	if policy == "" {
		policy = DefaultApprovalPolicy
	}
	var proc engines.ProcessSession
	var rollout, model, version string
	threadID := sc.ResumeSessionKey
	if attach {
		proc, rollout = a.attachRunning(ctx, sc, box)
	}
	if proc == nil {
		if err := a.writeConfig(ctx, sc, box, paths); err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate codex: %w", err)
		}
		p, err := box.StartProcess(ctx, a.processSpec(sc, paths, threadID))
		if err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate codex: %w", err)
		}
		proc = p
		params := map[string]any{"cwd": paths.WorkDir, "approvalPolicy": approvalPolicyParam(policy), "sandbox": "danger-full-access"}
		if a.cfg.Model != "" {
			params["model"] = a.cfg.Model
		}
		info, v, err := handshake(ctx, proc, params, threadID, threadName(sc.SessionID))
		if err != nil {
			_ = proc.Signal(context.WithoutCancel(ctx), "KILL")
			return engines.SessionRuntime{}, fmt.Errorf("activate codex: %w", err)
		}
		threadID, rollout, model, version = info.Thread.ID, info.Thread.Path, info.Model, v
	}
	client, err := NewClient(ClientConfig{Box: box, Process: proc, Identity: sc.RuntimeIdentity, ThreadID: threadID,
		RolloutPath: rollout, ApprovalPolicy: policy, Capabilities: a.Capabilities()})
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate codex: %w", err)
	}
	client.version, client.model = version, model
	manifest, err := engines.InitializeRuntimeClient(ctx, client, a.Capabilities(), sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate codex: %w", err)
	}
	material, _ := json.Marshal(resumeMaterial{Process: proc.Name(), Rollout: rollout})
	return engines.SessionRuntime{EngineClient: client, EngineManifest: manifest, ResumeMaterial: material}, nil
}

// threadName is the name a new thread gets: the AstraBox Session it belongs to, as
// Codex lists it.
func threadName(sessionID string) string {
	if sessionID == "" {
		return "AstraBox"
	}
	return "AstraBox " + sessionID
}

// attachRunning returns the thread's app-server and rollout path when the app-server
// still runs in this box, or nil.
func (a *Adapter) attachRunning(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.ProcessSession, string) {
	if sc.AttachMode != engines.AttachReconnect || len(sc.ResumeMaterial) == 0 {
		return nil, ""
	}
	var m resumeMaterial
	if json.Unmarshal(sc.ResumeMaterial, &m) != nil || m.Process == "" || m.Rollout == "" {
		return nil, ""
	}
	// Starting an existing name attaches; an unknown name starts a placeholder that
	// prints nothing and exits, while a running app-server has journalled at least its
	// initialize reply.
	p, err := box.StartProcess(ctx, engines.ProcessSpec{Name: m.Process, Command: []string{"/bin/false"}, Identity: sc.RuntimeIdentity})
	if err != nil {
		return nil, ""
	}
	if st, err := p.ExitStatus(ctx); err != nil || st != nil {
		return nil, ""
	}
	for range p.ReadOutput(ctx, 0, false) {
		return p, m.Rollout
	}
	return nil, ""
}

// processSpec is the app-server's command. CODEX_HOME is in the conversation's home,
// never under the temporary directory: Codex then refuses to create the helper binaries
// its tools need.
func (a *Adapter) processSpec(sc engines.EngineStartupContext, paths Paths, threadID string) engines.ProcessSpec {
	args := append(append([]string{}, a.cfg.Command...), "app-server")
	env := map[string]string{ConfigDirEnv: paths.CodexHome, "HOME": paths.HomeDir, "LANG": "C.UTF-8", "TERM": "dumb"}
	if len(a.cfg.PathDirs) > 0 {
		env["PATH"] = strings.Join(append(append([]string{}, a.cfg.PathDirs...), "/usr/local/bin", "/usr/bin", "/bin"), ":")
	}
	for k, v := range a.cfg.Env {
		env[k] = v
	}
	// A new name per launch: its journal starts again, and so does the cursor
	// generation that names it.
	tag := "new"
	if threadID != "" {
		tag = strings.ReplaceAll(threadID, "-", "")[:12]
	}
	return engines.ProcessSpec{Name: "codex-" + tag + "-" + randomHex(4), Command: args, Env: env, Dir: paths.WorkDir, Identity: sc.RuntimeIdentity}
}
