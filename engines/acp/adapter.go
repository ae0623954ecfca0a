package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/astrabox/astrabox/engines"
)

// DefaultEchoCommand runs a program under the box runner's stdin-echo, which journals
// what the client sends the program (see the package documentation).
var DefaultEchoCommand = []string{"/run/astrabox-runner", "stdin-echo", "--"}

// Config configures one adapter: one profile and where it runs.
type Config struct {
	// Profile is the program's profile.
	Profile Profile
	// EchoCommand is the argv prefix that journals stdin; default DefaultEchoCommand.
	EchoCommand []string
	// ModelBaseURL is the model service's base URL inside the box (the box's model
	// forward), the {model_base_url} of the profile.
	ModelBaseURL string
	// Env is added to the program's environment (after the profile's).
	Env map[string]string
	// DefaultRuntimeImage is used when a RuntimeProfile names no image.
	DefaultRuntimeImage string
	// WorkspaceDir and HomeDir are used when the startup context carries no runtime
	// identity (the box account); defaults /workspace and /workspace/.home.
	WorkspaceDir string
	HomeDir      string
	// Now is the clock a profile's LoadAfterStartMinute waits on; default time.Now.
	Now func() time.Time
}

// Adapter is the generic ACP engine adapter, one per profile.
type Adapter struct {
	cfg Config
}

var (
	_ engines.EngineAdapter     = (*Adapter)(nil)
	_ engines.SeamsAPIVersioned = (*Adapter)(nil)
)

// NewAdapter returns the adapter for a valid profile.
func NewAdapter(cfg Config) (*Adapter, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.EchoCommand) == 0 {
		cfg.EchoCommand = DefaultEchoCommand
	}
	if cfg.WorkspaceDir == "" {
		cfg.WorkspaceDir = "/workspace"
	}
	if cfg.HomeDir == "" {
		cfg.HomeDir = path.Join(cfg.WorkspaceDir, ".home")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Adapter{cfg: cfg}, nil
}

// Profile is the adapter's profile.
func (a *Adapter) Profile() Profile { return a.cfg.Profile }

// SeamsAPIVersion implements engines.SeamsAPIVersioned.
func (a *Adapter) SeamsAPIVersion() int { return engines.SeamsAPIVersion }

// Capabilities implements engines.EngineAdapter. The extensions are the profile's: the
// MCP transports it passes through ACP's mcpServers and its instructions file. Skills,
// packages and native documents are not passed to ACP programs.
func (a *Adapter) Capabilities() engines.EngineRuntimeCapabilities {
	p := a.cfg.Profile
	// A program without its own variable keeps its state folder under HOME, which the
	// adapter sets to the conversation's home: HOME is what moves it.
	dirEnv := p.StateDirEnv
	if dirEnv == "" {
		dirEnv = "HOME"
	}
	caps := engines.EngineRuntimeCapabilities{
		EngineKind:            p.Kind,
		SupportedSessionKinds: []engines.SessionKind{engines.SessionKindAgentChat, engines.SessionKindAssistantChat},
		Workload: engines.EngineWorkloadDeclaration{
			ConfigDirName: p.StateDir, ConfigDirEnv: dirEnv, RequiredCommands: []string{p.Command[0]},
		},
		ConversationPlacement:  engines.PlacementPerConversationAccount,
		DefaultRuntimeImage:    a.cfg.DefaultRuntimeImage,
		PermissionModes:        append([]string{}, p.Modes...),
		PermissionModeDefaults: map[engines.SessionKind]string{},
		Extensions: engines.EngineExtensions{
			MCPTransports: append([]engines.MCPTransport{}, p.MCPTransports...), InstructionsFile: p.InstructionsFile,
			NativePackageKinds: []string{}, NativeConfigDocuments: []engines.NativeConfigDocument{},
		},
		RequiresProcessSessions: true,
		SupportsServerInfo:      true,
	}
	if p.DefaultMode != "" {
		caps.PermissionModeDefaults[engines.SessionKindAgentChat] = p.DefaultMode
		caps.PermissionModeDefaults[engines.SessionKindAssistantChat] = p.DefaultMode
	}
	if p.SessionLog != "" {
		caps.SessionLog = &engines.SessionLogDeclaration{PathPattern: p.SessionLog}
	}
	if len(p.StateFiles) > 0 {
		// The state files are one Session's (the program's database of its sessions,
		// in the Session's own account): saved before the box goes, restored into the
		// next one.
		caps.RuntimeStateStore, caps.RuntimeStateScope = true, engines.RuntimeStateScopeSession
	}
	return caps
}

// EngineClientType implements engines.EngineAdapter.
func (a *Adapter) EngineClientType() reflect.Type { return reflect.TypeFor[*Client]() }

// SandboxRequest implements engines.EngineAdapter.
func (a *Adapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: a.cfg.Profile.ModelKeyEnv},
		WorkingDirectoryVariable: "ASTRABOX_WORKSPACE",
		Environment:              map[string]string{},
	}
}

// StartupMaterialRequest implements engines.EngineAdapter: a transcript is declared as a
// session log, which the platform mirrors itself; state files need the platform's
// runtime-state storage.
func (a *Adapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{Secrets: []string{}, RuntimeStateStorage: len(a.cfg.Profile.StateFiles) > 0}
}

// resumeMaterial is what the platform saves with the Session: the process session that
// runs the ACP session, and when the ACP session started (for LoadAfterStartMinute).
type resumeMaterial struct {
	Process string    `json:"process"`
	Started time.Time `json:"started,omitzero"`
}

// Paths are the runtime-visible directories one conversation uses.
type Paths struct {
	HomeDir, StateDir, WorkDir string
}

// PathsFor resolves the directories for a startup context.
func (a *Adapter) PathsFor(sc engines.EngineStartupContext) Paths {
	home, work := a.cfg.HomeDir, a.cfg.WorkspaceDir
	if id := sc.RuntimeIdentity; id != nil {
		home, work = id.HomeDir, id.WorkspaceDir
	}
	return Paths{HomeDir: home, StateDir: path.Join(home, a.cfg.Profile.StateDir), WorkDir: work}
}

// ActivateRuntime implements engines.EngineAdapter. A new Session starts the program and
// a new ACP session; an attach reconnects to the running program named in the resume
// material or, when it is gone (or the box is new, the platform having restored the
// session log), starts the program again and reopens exactly the Session's ACP session
// with session/resume or session/load.
func (a *Adapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) (engines.SessionRuntime, error) {
	p := a.cfg.Profile
	attach := sc.AttachMode != ""
	if attach && sc.ResumeSessionKey == "" {
		return engines.SessionRuntime{}, fmt.Errorf("activate %s: attach without an ACP session id", p.Kind)
	}
	paths := a.PathsFor(sc)
	state, err := a.restoreState(ctx, sc, box, paths)
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate %s: %w", p.Kind, err)
	}
	var proc engines.ProcessSession
	sessionID := sc.ResumeSessionKey
	// Unreadable material (or none) leaves the session's start unknown, which
	// LoadAfterStartMinute treats conservatively; the process name is read again below.
	var previous resumeMaterial
	if len(sc.ResumeMaterial) > 0 {
		_ = json.Unmarshal(sc.ResumeMaterial, &previous)
	}
	sessionStarted := previous.Started
	if attach {
		proc = a.attachRunning(ctx, sc, box)
	}
	if proc == nil {
		started, id, at, err := a.start(ctx, sc, box, paths, sessionStarted)
		if err != nil {
			return engines.SessionRuntime{}, fmt.Errorf("activate %s: %w", p.Kind, err)
		}
		proc, sessionID = started, id
		if !at.IsZero() {
			sessionStarted = at
		}
	}
	client := newClient(p, a.Capabilities(), proc, sessionID)
	client.state = state
	if p.Admission == AdmissionSessionLog {
		client.log = newSessionLog(box, sc.RuntimeIdentity, paths.StateDir, p.SessionLog, sessionID)
	}
	manifest, err := engines.InitializeRuntimeClient(ctx, client, a.Capabilities(), sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, fmt.Errorf("activate %s: %w", p.Kind, err)
	}
	material, _ := json.Marshal(resumeMaterial{Process: proc.Name(), Started: sessionStarted})
	return engines.SessionRuntime{EngineClient: client, EngineManifest: manifest, ResumeMaterial: material}, nil
}

// attachRunning returns the program's process session when it still runs in this box.
func (a *Adapter) attachRunning(ctx context.Context, sc engines.EngineStartupContext, box engines.Box) engines.ProcessSession {
	if sc.AttachMode != engines.AttachReconnect || len(sc.ResumeMaterial) == 0 {
		return nil
	}
	var m resumeMaterial
	if json.Unmarshal(sc.ResumeMaterial, &m) != nil || m.Process == "" {
		return nil
	}
	// Starting an existing name attaches; an unknown name starts a placeholder that
	// prints nothing and exits, while a running program has journalled at least the
	// handshake.
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

// start writes the profile's files, starts the program and opens the ACP session: a
// new one, or sc.ResumeSessionKey reopened (started is when that session started, zero
// when unknown). It returns the process, the session id and, for a new session, when
// it started.
func (a *Adapter) start(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths, started time.Time) (engines.ProcessSession, string, time.Time, error) {
	p := a.cfg.Profile
	vars := map[string]string{"home": paths.HomeDir, "state": paths.StateDir, "workspace": paths.WorkDir, "model_base_url": a.cfg.ModelBaseURL}
	names := make([]string, 0, len(p.Files))
	for name := range p.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.HomeDir, name), []byte(expand(p.Files[name], vars)), 0o600); err != nil {
			return nil, "", time.Time{}, fmt.Errorf("write %s: %w", name, err)
		}
	}
	// The Agent's instructions, written before every start (empty when unset), so a
	// change reaches the next start and a removed one is gone.
	if p.InstructionsFile != "" {
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, path.Join(paths.StateDir, p.InstructionsFile), []byte(sc.AgentConfig.Instructions), 0o600); err != nil {
			return nil, "", time.Time{}, fmt.Errorf("write %s: %w", p.InstructionsFile, err)
		}
	}
	env := map[string]string{"HOME": paths.HomeDir, "LANG": "C.UTF-8", "TERM": "dumb"}
	if p.StateDirEnv != "" {
		env[p.StateDirEnv] = paths.StateDir
	}
	for k, v := range p.Env {
		env[k] = expand(v, vars)
	}
	for k, v := range a.cfg.Env {
		env[k] = v
	}
	argv := append([]string{}, a.cfg.EchoCommand...)
	for _, arg := range p.Command {
		argv = append(argv, expand(arg, vars))
	}
	tag := "new"
	if sc.ResumeSessionKey != "" {
		tag = strings.ReplaceAll(sc.ResumeSessionKey, "-", "")
		tag = tag[:min(len(tag), 12)]
	}
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: p.Kind + "-" + tag + "-" + randomHex(4), Command: argv, Env: env,
		Dir: paths.WorkDir, Identity: sc.RuntimeIdentity})
	if err != nil {
		return nil, "", time.Time{}, err
	}
	sessionID, at, err := a.handshake(ctx, sc, proc, paths, started)
	if err != nil {
		_ = proc.Signal(context.WithoutCancel(ctx), "KILL")
		return nil, "", time.Time{}, err
	}
	return proc, sessionID, at, nil
}

// clientInfo is what the client says of itself in initialize.
var clientInfo = map[string]any{"name": "astrabox", "title": "AstraBox", "version": "1"}

// handshake initializes the program and opens the session, then puts it in the
// Session's permission mode.
func (a *Adapter) handshake(ctx context.Context, sc engines.EngineStartupContext, proc engines.ProcessSession, paths Paths, started time.Time) (string, time.Time, error) {
	p := a.cfg.Profile
	res, err := call(ctx, proc, 0, idHandshake+methodInitialize, methodInitialize, map[string]any{
		"protocolVersion": protocolVersion,
		// Tools stay inside the program, in its box: no fs/* or terminal/* callbacks.
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         clientInfo,
	})
	if err != nil {
		return "", time.Time{}, err
	}
	var init acpsdk.InitializeResponse
	if err := json.Unmarshal(res, &init); err != nil {
		return "", time.Time{}, fmt.Errorf("initialize reply: %w", err)
	}
	if init.ProtocolVersion != protocolVersion {
		return "", time.Time{}, fmt.Errorf("the agent speaks ACP version %d, not %d", init.ProtocolVersion, protocolVersion)
	}
	servers, err := mcpServers(sc.AgentConfig.MCPServers, init.AgentCapabilities.McpCapabilities)
	if err != nil {
		return "", time.Time{}, err
	}
	sessionParams := map[string]any{"cwd": paths.WorkDir, "mcpServers": servers}
	var modes *acpsdk.SessionModeState
	sessionID := sc.ResumeSessionKey
	if sessionID == "" {
		if len(p.NewSessionMeta) > 0 {
			sessionParams["_meta"] = p.NewSessionMeta
		}
		res, err := call(ctx, proc, 0, idHandshake+methodSessionNew, methodSessionNew, sessionParams)
		if err != nil {
			return "", time.Time{}, err
		}
		var created acpsdk.NewSessionResponse
		if err := json.Unmarshal(res, &created); err != nil || created.SessionId == "" {
			return "", time.Time{}, fmt.Errorf("session/new reply without a session id: %s", res)
		}
		sessionID, modes = string(created.SessionId), created.Modes
		// Read after the reply: the program named its files by a minute no later.
		started = a.cfg.Now()
	} else {
		sessionParams["sessionId"] = sessionID
		method := methodSessionLoad
		if p.Resume == ResumeResume {
			method = methodSessionResume
		}
		if method == methodSessionLoad && !init.AgentCapabilities.LoadSession {
			return "", time.Time{}, errors.New("the agent does not offer session/load")
		}
		if method == methodSessionLoad && p.LoadAfterStartMinute {
			if err := a.awaitLaterMinute(ctx, started); err != nil {
				return "", time.Time{}, err
			}
		}
		res, err := call(ctx, proc, 0, idHandshake+method, method, sessionParams)
		if err != nil {
			return "", time.Time{}, err
		}
		var reopened struct {
			Modes *acpsdk.SessionModeState `json:"modes"`
		}
		_ = json.Unmarshal(res, &reopened)
		modes = reopened.Modes
	}
	if err := a.checkModes(modes); err != nil {
		return "", time.Time{}, err
	}
	mode := sc.PermissionMode
	if mode == "" {
		mode = p.DefaultMode
	}
	if mode != "" && (modes == nil || string(modes.CurrentModeId) != mode) {
		if _, err := call(ctx, proc, 0, idPrefixMode+mode+":"+randomHex(4), methodSessionSetMode,
			map[string]any{"sessionId": sessionID, "modeId": mode}); err != nil {
			return "", time.Time{}, err
		}
	}
	return sessionID, started, nil
}

// awaitLaterMinute waits until the wall-clock minute is later than the one the session
// started in; with the start unknown, until the next minute begins, which is later
// than any start before now. A second more allows for the program's clock.
func (a *Adapter) awaitLaterMinute(ctx context.Context, started time.Time) error {
	wait := laterMinuteWait(a.cfg.Now(), started)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for a later minute than the session's start: %w", ctx.Err())
	}
}

// laterMinuteWait is how long from now until a minute later than the one started is
// in (zero started: than now's), with a second's margin; zero when now is already
// in a later minute.
func laterMinuteWait(now, started time.Time) time.Duration {
	if started.IsZero() {
		started = now
	} else if now.Truncate(time.Minute).After(started.Truncate(time.Minute)) {
		return 0
	}
	return max(started.Truncate(time.Minute).Add(time.Minute+time.Second).Sub(now), 0)
}

// checkModes refuses a program that does not offer every mode its profile declares:
// the platform would offer modes the program refuses.
func (a *Adapter) checkModes(modes *acpsdk.SessionModeState) error {
	if len(a.cfg.Profile.Modes) == 0 || modes == nil {
		return nil
	}
	offered := make([]string, 0, len(modes.AvailableModes))
	for _, m := range modes.AvailableModes {
		offered = append(offered, string(m.Id))
	}
	for _, m := range a.cfg.Profile.Modes {
		if !slices.Contains(offered, m) {
			return fmt.Errorf("the agent offers the modes %v; the profile declares %q, which it lacks", offered, m)
		}
	}
	return nil
}

// mcpServers are the Agent's MCP servers as ACP's McpServer entries, sent with every
// session/new, session/load and session/resume (an ACP program keeps none across a
// process). An http or sse server the program's initialize reply does not offer fails
// the start rather than being dropped.
func mcpServers(servers []engines.MCPServerConfig, offered acpsdk.McpCapabilities) ([]any, error) {
	out := make([]any, 0, len(servers))
	for _, s := range servers {
		switch s.Transport {
		case engines.MCPTransportStdio:
			if len(s.Command) == 0 {
				return nil, fmt.Errorf("MCP server %q has no command", s.Name)
			}
			env := make([]acpsdk.EnvVariable, 0, len(s.Env))
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, acpsdk.EnvVariable{Name: k, Value: s.Env[k]})
			}
			out = append(out, acpsdk.McpServerStdio{Name: s.Name, Command: s.Command[0], Args: append([]string{}, s.Command[1:]...), Env: env})
		case engines.MCPTransportHTTP, engines.MCPTransportSSE:
			if (s.Transport == engines.MCPTransportHTTP && !offered.Http) || (s.Transport == engines.MCPTransportSSE && !offered.Sse) {
				return nil, fmt.Errorf("MCP server %q: the agent does not offer %s MCP servers (its mcpCapabilities)", s.Name, s.Transport)
			}
			headers := make([]acpsdk.HttpHeader, 0, len(s.Headers))
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, acpsdk.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			out = append(out, map[string]any{"type": string(s.Transport), "name": s.Name, "url": s.URL, "headers": headers})
		default:
			return nil, fmt.Errorf("MCP server %q: transport %q is not one ACP carries", s.Name, s.Transport)
		}
	}
	return out, nil
}
