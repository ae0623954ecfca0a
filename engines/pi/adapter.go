package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/google/uuid"

	"github.com/astrabox/astrabox/engines"
)

// EngineKind is Pi's engine_kind.
const EngineKind = "pi"

// ConfigDirName and ConfigDirEnv are where Pi keeps its state (models.json, auth.json,
// sessions) and the variable that moves it; the platform composes the directory under
// the runtime home.
const (
	ConfigDirName = ".pi"
	ConfigDirEnv  = "PI_CODING_AGENT_DIR"
)

// Pi's model APIs (models.json "api") the adapter can point a provider at.
const (
	APIAnthropicMessages = "anthropic-messages"
	APIOpenAICompletions = "openai-completions"
)

// providerName is the models.json provider the adapter defines: the box's model
// forward.
const providerName = "astrabox"

// DefaultModel is the model id asked for when none is configured.
const DefaultModel = "claude-sonnet-4-5"

// ModelKeyEnv is the variable the box holds the (placeholder) model key in; models.json
// names it, and the forward's host side replaces it with the real credential.
const ModelKeyEnv = "ANTHROPIC_API_KEY"

// Config configures the adapter.
type Config struct {
	// Command is Pi's argv prefix in the box (node and Pi's cli.js); default ["pi"].
	Command []string
	// Version is the Pi release Command runs, reported as the runtime's version (Pi
	// does not report it over rpc).
	Version string
	// ModelBaseURL is the base URL of the box's model forward as Pi's provider takes
	// it: without /v1 for Anthropic Messages, with /v1 for Chat Completions.
	ModelBaseURL string
	// API is the forward's model API; default APIAnthropicMessages.
	API string
	// Model is the model id; default DefaultModel.
	Model string
	// Env is added to Pi's environment.
	Env map[string]string
	// DefaultRuntimeImage is used when a RuntimeProfile names no image.
	DefaultRuntimeImage string
	// WorkspaceDir and HomeDir are used when the startup context carries no runtime
	// identity (the box account); defaults /workspace and /workspace/.home.
	WorkspaceDir string
	HomeDir      string
}

// Adapter is Pi's engine adapter.
type Adapter struct {
	cfg Config
}

var (
	_ engines.EngineAdapter     = (*Adapter)(nil)
	_ engines.SeamsAPIVersioned = (*Adapter)(nil)
)

// NewAdapter returns the adapter.
func NewAdapter(cfg Config) *Adapter {
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"pi"}
	}
	if cfg.API == "" {
		cfg.API = APIAnthropicMessages
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
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

// Capabilities implements engines.EngineAdapter. The permission modes are the
// platform extension's (Pi has none). No extension is declared: the Agent's MCP
// servers, Skills and native documents are not yet applied to Pi, and a declared
// extension that does nothing would be stored as an inert setting.
func (a *Adapter) Capabilities() engines.EngineRuntimeCapabilities {
	return engines.EngineRuntimeCapabilities{
		EngineKind:            EngineKind,
		SupportedSessionKinds: []engines.SessionKind{engines.SessionKindAgentChat, engines.SessionKindAssistantChat},
		Workload: engines.EngineWorkloadDeclaration{
			ConfigDirName: ConfigDirName, ConfigDirEnv: ConfigDirEnv, RequiredCommands: []string{a.cfg.Command[0]},
		},
		ConversationPlacement: engines.PlacementPerConversationAccount,
		DefaultRuntimeImage:   a.cfg.DefaultRuntimeImage,
		PermissionModes:       append([]string{}, PermissionModes...),
		PermissionModeDefaults: map[engines.SessionKind]string{
			engines.SessionKindAgentChat: ModeAsk, engines.SessionKindAssistantChat: ModeAsk,
		},
		Extensions:              extensions(),
		SessionLog:              &engines.SessionLogDeclaration{PathPattern: SessionPattern},
		RequiresProcessSessions: true,
		SupportsServerInfo:      true,
	}
}

// EngineClientType implements engines.EngineAdapter.
func (a *Adapter) EngineClientType() reflect.Type { return reflect.TypeFor[*Client]() }

// SandboxRequest implements engines.EngineAdapter. Pi reads its key from the variable
// models.json names; the base URL there is the box's model forward.
func (a *Adapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: ModelKeyEnv},
		WorkingDirectoryVariable: "ASTRABOX_WORKSPACE",
		Environment:              map[string]string{},
	}
}

// StartupMaterialRequest implements engines.EngineAdapter: the session file is
// declared as a session log, which the platform mirrors itself.
func (a *Adapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{Secrets: []string{}}
}

// resumeMaterial is what the platform saves with the Session and hands back on
// attach: the process session that runs the conversation.
type resumeMaterial struct {
	Process string `json:"process"`
}

// Paths are the runtime-visible directories and files one conversation uses.
type Paths struct {
	AgentDir, WorkDir, HomeDir string
}

// PathsFor resolves the directories for a startup context: from its runtime identity,
// or the adapter's defaults for the box account.
func (a *Adapter) PathsFor(sc engines.EngineStartupContext) Paths {
	if id := sc.RuntimeIdentity; id != nil {
		return Paths{AgentDir: path.Join(id.HomeDir, ConfigDirName), WorkDir: id.WorkspaceDir, HomeDir: id.HomeDir}
	}
	return Paths{AgentDir: path.Join(a.cfg.HomeDir, ConfigDirName), WorkDir: a.cfg.WorkspaceDir, HomeDir: a.cfg.HomeDir}
}

// SessionFile is the session JSONL of a session key under the agent folder.
func (p Paths) SessionFile(key string) string {
	return path.Join(p.AgentDir, strings.ReplaceAll(SessionPattern, engines.SessionLogKeyPlaceholder, key))
}

func (p Paths) extension() string { return path.Join(p.AgentDir, "astrabox", ApprovalExtensionName) }

// ActivateRuntime implements engines.EngineAdapter. A new Session gets a session key
// the platform chooses, naming its session file; an attach reconnects to the running
// Pi named in the resume material or, when it is gone (or the box is new, the
// platform having restored the session file), starts Pi again on the same file.
func (a *Adapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	paths := a.PathsFor(sc)
	attach := sc.AttachMode != ""
	if attach && sc.ResumeSessionKey == "" {
		return engines.SessionRuntime{}, errors.New("activate pi: attach without a session key")
	}
	if a.cfg.ModelBaseURL == "" {
		return engines.SessionRuntime{}, errors.New("activate pi: no model base URL is configured (Config.ModelBaseURL)")
	}
	mode := sc.PermissionMode
	if mode == "" {
		mode = ModeAsk
	}
	key := sc.ResumeSessionKey
	if !attach {
		key = uuid.NewString()
	}
	file := paths.SessionFile(key)
	var proc engines.ProcessSession
	if attach {
		proc = a.attachRunning(ctx, sc, box)
		if proc == nil && !sc.ConversationEmpty {
			if _, err := box.ReadFile(ctx, sc.RuntimeIdentity, file); err != nil {
				return engines.SessionRuntime{}, fmt.Errorf("activate pi: the session file %s of conversation %s is missing: %w", file, key, err)
			}
		}
	}
	model := a.cfg.Model
	if proc == nil {
		p, m, err := a.start(ctx, sc, box, paths, key, file, mode)
		if err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate pi: %w", err)
		}
		proc, model = p, m
	}
	client, err := NewClient(ClientConfig{Box: box, Process: proc, Identity: sc.RuntimeIdentity, SessionKey: key,
		SessionFile: file, PermissionMode: mode, Model: model, Version: a.cfg.Version, Capabilities: a.Capabilities()})
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate pi: %w", err)
	}
	manifest, err := engines.InitializeRuntimeClient(ctx, client, a.Capabilities(), sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate pi: %w", err)
	}
	material, _ := json.Marshal(resumeMaterial{Process: proc.Name()})
	return engines.SessionRuntime{EngineClient: client, EngineManifest: manifest, ResumeMaterial: material}, nil
}

// start writes models.json and the approval extension into the agent folder, starts
// Pi on the session file and waits for its get_state answer; it returns the process
// and the model Pi runs.
func (a *Adapter) start(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths, key, file, mode string) (engines.ProcessSession, string, error) {
	models, err := a.modelsJSON()
	if err != nil {
		return nil, "", err
	}
	if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.AgentDir, "models.json"), models, 0o600); err != nil {
		return nil, "", fmt.Errorf("write models.json: %w", err)
	}
	// Written at every start: an edit the agent made to it lasts only until then.
	if err := box.WriteFile(ctx, sc.RuntimeIdentity, paths.extension(), ApprovalExtension, 0o600); err != nil {
		return nil, "", fmt.Errorf("write the approval extension: %w", err)
	}
	if err := writeAgentConfig(ctx, sc, box, paths); err != nil {
		return nil, "", err
	}
	proc, err := box.StartProcess(ctx, a.processSpec(sc, paths, key, file, mode))
	if err != nil {
		return nil, "", err
	}
	data, err := call(ctx, proc, 0, requestIDState, map[string]any{"id": requestIDState, "type": cmdGetState})
	if err != nil {
		_ = proc.Signal(context.WithoutCancel(ctx), "KILL")
		return nil, "", err
	}
	var st piState
	if err := json.Unmarshal(data, &st); err != nil || st.SessionFile != file {
		_ = proc.Signal(context.WithoutCancel(ctx), "KILL")
		return nil, "", fmt.Errorf("pi runs session file %q, not %q", st.SessionFile, file)
	}
	return proc, st.Model.ID, nil
}

// attachRunning returns the conversation's Pi when it still runs in this box, or nil.
func (a *Adapter) attachRunning(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) engines.ProcessSession {
	if sc.AttachMode != engines.AttachReconnect || len(sc.ResumeMaterial) == 0 {
		return nil
	}
	var m resumeMaterial
	if json.Unmarshal(sc.ResumeMaterial, &m) != nil || m.Process == "" {
		return nil
	}
	// Starting an existing name attaches; an unknown name starts a placeholder that
	// prints nothing and exits, while a running Pi has journalled at least its
	// get_state answer.
	p, err := box.StartProcess(ctx, engines.ProcessSpec{Name: m.Process, Command: []string{"/bin/false"}, Identity: sc.RuntimeIdentity})
	if err != nil {
		return nil
	}
	if st, err := p.ExitStatus(ctx); err != nil || st != nil {
		return nil
	}
	for range p.ReadOutput(ctx, 0, false) {
		return p
	}
	return nil
}

// modelsJSON is the models.json whose one provider is the box's model forward.
func (a *Adapter) modelsJSON() ([]byte, error) {
	provider := map[string]any{
		"baseUrl": a.cfg.ModelBaseURL, "api": a.cfg.API, "apiKey": ModelKeyEnv,
		"models": []any{map[string]any{"id": a.cfg.Model, "name": a.cfg.Model, "input": []string{"text", "image"},
			"contextWindow": 200000, "maxTokens": 8192}},
	}
	if a.cfg.API == APIOpenAICompletions {
		provider["compat"] = map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false}
	}
	return json.Marshal(map[string]any{"providers": map[string]any{providerName: provider}})
}

// processSpec is Pi's rpc command: offline, on the session file the platform chose,
// with the approval extension in the Session's permission mode.
func (a *Adapter) processSpec(sc engines.EngineStartupContext, paths Paths, key, file, mode string) engines.ProcessSpec {
	args := append(append([]string{}, a.cfg.Command...), "--mode", "rpc", "--provider", providerName, "--model", a.cfg.Model,
		"--session", file, "-e", paths.extension())
	env := map[string]string{ConfigDirEnv: paths.AgentDir, "HOME": paths.HomeDir, "LANG": "C.UTF-8", "TERM": "dumb",
		"PI_OFFLINE": "1", "PI_TELEMETRY": "0", PermissionModeEnv: mode}
	for k, v := range a.cfg.Env {
		env[k] = v
	}
	// A new name per launch: its journal starts again, and so does the cursor
	// generation that names it.
	return engines.ProcessSpec{Name: "pi-" + strings.ReplaceAll(key, "-", "")[:12] + "-" + randomHex(4), Command: args, Env: env,
		Dir: paths.WorkDir, Identity: sc.RuntimeIdentity}
}
