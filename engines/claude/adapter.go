package claude

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

// EngineKind is Claude Code's engine_kind.
const EngineKind = "claude_code"

// ConfigDirName and ConfigDirEnv are where Claude Code keeps its state and the
// variable that moves it; the platform composes the directory under the runtime home.
const (
	ConfigDirName = ".claude"
	ConfigDirEnv  = "CLAUDE_CONFIG_DIR"
)

// PermissionModes are Claude Code 2.1.328's permission modes, in its own words, as its
// set_permission_mode answer lists them ("manual" is an alias Claude reports back as
// default, so it is not a mode of its own).
var PermissionModes = []string{"default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"}

// Config configures the adapter.
type Config struct {
	// Command is Claude Code's argv prefix in the box; default ["claude"].
	Command []string
	// Env is added to Claude Code's environment (for example ANTHROPIC_BASE_URL when
	// the box does not set it, or CLAUDE_CODE_TMPDIR).
	Env map[string]string
	// DefaultRuntimeImage is used when a RuntimeProfile names no image.
	DefaultRuntimeImage string
	// WorkspaceDir and HomeDir are used when the startup context carries no runtime
	// identity (the box account); defaults /workspace and /workspace/.home.
	WorkspaceDir string
	HomeDir      string
}

// Adapter is the Claude Code engine adapter.
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
		cfg.Command = []string{"claude"}
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
		PermissionModes:       append([]string{}, PermissionModes...),
		PermissionModeDefaults: map[engines.SessionKind]string{
			engines.SessionKindAgentChat: "default", engines.SessionKindAssistantChat: "default",
		},
		Extensions: extensions(),
		// Claude keeps the log under a directory named after its working directory.
		// The platform can only locate a literal path in a box (it cannot list one),
		// so the pattern names the directory of the configured workspace.
		SessionLog:              &engines.SessionLogDeclaration{PathPattern: TranscriptPath("", a.cfg.WorkspaceDir, engines.SessionLogKeyPlaceholder)},
		RequiresProcessSessions: true,
		SupportsServerInfo:      true,
	}
}

// EngineClientType implements engines.EngineAdapter.
func (a *Adapter) EngineClientType() reflect.Type { return reflect.TypeFor[*Client]() }

// SandboxRequest implements engines.EngineAdapter. Claude Code reads its key and the
// model service's address from the environment; the box holds a placeholder key and the
// platform's forwarder adds the real credential on the host side.
func (a *Adapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		ModelCredential: engines.ModelCredentialDestination{
			APIKeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL",
		},
		WorkingDirectoryVariable: "ASTRABOX_WORKSPACE",
		Environment:              fixedEnv(),
	}
}

// fixedEnv is the environment every Claude Code process gets: no nonessential traffic
// (no reporting to Anthropic, no DNS; the OpenTelemetry export a RuntimeProfile asks for
// is separate, see telemetryEnv), session_state_changed on stdout, and the sandbox marker that
// lets bypassPermissions run in a box.
func fixedEnv() map[string]string {
	return map[string]string{
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"CLAUDE_CODE_SDK_READS_SESSION_STATE":      "1",
		"IS_SANDBOX":                               "1",
	}
}

// StartupMaterialRequest implements engines.EngineAdapter: the transcript is declared
// as a session log, which the platform mirrors itself; nothing else is needed.
func (a *Adapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{Secrets: []string{}}
}

// resumeMaterial is what the platform saves with the Session and hands back on attach:
// the process session that runs the conversation.
type resumeMaterial struct {
	Process string `json:"process"`
}

// Paths are the runtime-visible directories one conversation uses.
type Paths struct {
	ConfigDir, WorkDir, HomeDir string
}

// PathsFor resolves the directories for a startup context: from its runtime identity,
// or the adapter's defaults for the box account.
func (a *Adapter) PathsFor(sc engines.EngineStartupContext) Paths {
	if id := sc.RuntimeIdentity; id != nil {
		return Paths{ConfigDir: path.Join(id.HomeDir, ConfigDirName), WorkDir: id.WorkspaceDir, HomeDir: id.HomeDir}
	}
	return Paths{ConfigDir: path.Join(a.cfg.HomeDir, ConfigDirName), WorkDir: a.cfg.WorkspaceDir, HomeDir: a.cfg.HomeDir}
}

// ActivateRuntime implements engines.EngineAdapter. A new Session starts Claude Code
// with a session id chosen here; an attach reconnects to the running process session
// named in the resume material, or, when it is gone (or the box is new), starts Claude
// Code again on exactly the Session's conversation (relaunchFlag).
func (a *Adapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	paths := a.PathsFor(sc)
	claudeSession := sc.ResumeSessionKey
	attach := sc.AttachMode != ""
	if attach && claudeSession == "" {
		return engines.SessionRuntime{}, errors.New("activate claude code: attach without a session key")
	}
	if !attach {
		claudeSession = newUUID()
	}
	transcript := TranscriptPath(paths.ConfigDir, paths.WorkDir, claudeSession)

	var proc engines.ProcessSession
	if attach {
		// A running process is the conversation itself, whether or not Claude has
		// written its transcript yet.
		proc = a.attachRunning(ctx, sc, box)
	}
	fresh := proc == nil
	if fresh {
		flag := flagSessionID
		if attach {
			f, err := relaunchFlag(ctx, sc, box, transcript)
			if err != nil {
				return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
			}
			flag = f
		}
		extra, err := writeAgentConfig(ctx, sc, box, paths)
		if err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
		}
		p, err := box.StartProcess(ctx, a.processSpec(sc, paths, claudeSession, flag, extra))
		if err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
		}
		proc = p
	}
	client, err := NewClient(ClientConfig{Box: box, Process: proc, Identity: sc.RuntimeIdentity, SessionID: sc.SessionID,
		ClaudeSession: claudeSession, TranscriptPath: transcript, Capabilities: a.Capabilities(),
		CheckpointPath: CheckpointPath(paths.ConfigDir, proc.Name())})
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
	}
	if err := client.initialize(ctx); err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
	}
	// A fresh process got the mode on its command line. A running one may hold an
	// older mode: the platform's reader sets the stored one when it connects (and
	// settles a refusal), so attaching never fails on a mode.
	manifest, err := engines.InitializeRuntimeClient(ctx, client, a.Capabilities(), sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate claude code: %w", err)
	}
	material, _ := json.Marshal(resumeMaterial{Process: proc.Name()})
	return engines.SessionRuntime{EngineClient: client, EngineManifest: manifest, ResumeMaterial: material}, nil
}

// Claude Code's flags that name the conversation a process runs: a conversation with
// this id that Claude has not written yet, or one to resume from its transcript.
const (
	flagSessionID = "--session-id"
	flagResume    = "--resume"
)

// relaunchFlag decides how Claude Code starts again on an attached conversation whose
// process is gone. Claude writes the transcript only at its first turn, so a
// conversation without one is resumed as what it is, the same id not yet written
// (--session-id), when the platform knows it never held content; if the platform
// recorded content, the transcript was lost and starting would bind the Session to an
// empty conversation, so activation fails.
func relaunchFlag(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, transcript string) (string, error) {
	_, err := box.ReadFile(ctx, sc.RuntimeIdentity, transcript)
	switch {
	case err == nil:
		return flagResume, nil
	case sc.ConversationEmpty:
		return flagSessionID, nil
	}
	return "", fmt.Errorf("conversation %s has no transcript in the box but the platform recorded content for it, "+
		"refusing to start an empty one: %w", sc.ResumeSessionKey, err)
}

// attachRunning returns the conversation's process session when it still runs in
// this box, or nil.
func (a *Adapter) attachRunning(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) engines.ProcessSession {
	if sc.AttachMode != engines.AttachReconnect || len(sc.ResumeMaterial) == 0 {
		return nil
	}
	var m resumeMaterial
	if json.Unmarshal(sc.ResumeMaterial, &m) != nil || m.Process == "" {
		return nil
	}
	// Starting an existing name attaches. Should the name be unknown to this box (its
	// runner started again), the placeholder that starts instead prints nothing and
	// exits: Claude's own session has journalled at least its initialize answer.
	p, err := box.StartProcess(ctx, engines.ProcessSpec{Name: m.Process, Command: []string{"/bin/false"}, Identity: sc.RuntimeIdentity})
	if err != nil {
		return nil
	}
	if st, err := p.ExitStatus(ctx); err != nil || st != nil {
		return nil
	}
	for range p.ReadOutput(ctx, 0, false) {
		// A line, or output already freed after the platform recorded it: Claude's.
		return p
	}
	return nil
}

// processSpec is Claude Code's headless command: stream-json both ways, partial
// messages for deltas, permission prompts routed to the control protocol, user
// messages echoed, and exactly one conversation (flag is flagSessionID or flagResume);
// extra carries the flags of the Agent's configuration (writeAgentConfig).
// --allow-dangerously-skip-permissions makes bypassPermissions one more mode the
// running process can be switched to: without it Claude refuses that switch ("not
// launched with --dangerously-skip-permissions"), while it starts in no mode it was
// not asked for.
func (a *Adapter) processSpec(sc engines.EngineStartupContext, paths Paths, claudeSession, flag string, extra []string) engines.ProcessSpec {
	args := append([]string{}, a.cfg.Command...)
	args = append(args, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-prompt-tool", "stdio", "--replay-user-messages",
		"--allow-dangerously-skip-permissions")
	args = append(args, flag, claudeSession)
	args = append(args, extra...)
	if sc.PermissionMode != "" {
		args = append(args, "--permission-mode", sc.PermissionMode)
	}
	env := fixedEnv()
	env[ConfigDirEnv] = paths.ConfigDir
	env["HOME"] = paths.HomeDir
	for k, v := range a.cfg.Env {
		env[k] = v
	}
	for k, v := range telemetryEnv(sc.TracingEndpoint) {
		env[k] = v
	}
	// A new name per launch: its journal starts again, and so does the cursor
	// generation that names it.
	name := "claude-" + strings.ReplaceAll(claudeSession, "-", "")[:12] + "-" + randomHex(4)
	return engines.ProcessSpec{Name: name, Command: args, Env: env, Dir: paths.WorkDir, Identity: sc.RuntimeIdentity}
}

func newUUID() string {
	b := make([]byte, 16)
	copy(b, randomBytes(16))
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := fmt.Sprintf("%x", b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
