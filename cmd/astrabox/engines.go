package main

import (
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/store"
)

// Where local boxes see the pinned releases of the built-in programs.
const (
	claudeMountPoint = "/opt/astrabox/claude"
	codexMountPoint  = "/opt/astrabox/codex"
	// Pi's node_modules keeps its name in the box: Node resolves Pi's dependencies
	// from a folder called node_modules.
	piMountPoint = "/opt/astrabox/pi/node_modules"

	// acpMountPoint is named node_modules: Node looks for the packages the ACP
	// programs import in a folder of that name.
	acpMountPoint = "/opt/astrabox/acp/node_modules"

	// scriptedMountPoint holds the scripted test program's folder in its boxes.
	scriptedMountPoint = "/opt/astrabox/scripted"
)

// installedEngines is the process's one engine registry and what boxes need
// to run its programs.
type installedEngines struct {
	registry *engines.Registry
	// mounts are the program installs bound into boxes, by engine kind.
	mounts map[string][]sandbox.Mount
	// forwards are the model forwards of programs that do not speak the default
	// (Anthropic) API, by engine kind.
	forwards map[string]sandbox.Forward
	// acpMounts are the pinned ACP installs (tools/acp-agents, and the Claude Code and
	// Codex CLI that two of its programs drive) bound into an image-less local box of a
	// RuntimeProfile that defines its ACP program; empty without the installs.
	acpMounts []sandbox.Mount
}

// newInstalledEngines registers the Agent programs this build ships. Each runs
// from its configured command, or else from the pinned release in tools/agents,
// bound read-only into local boxes.
func newInstalledEngines(cfg config.Engines) (*installedEngines, error) {
	out := &installedEngines{registry: engines.NewRegistry(), mounts: map[string][]sandbox.Mount{},
		forwards: map[string]sandbox.Forward{}}
	command := cfg.Claude.Command
	if len(command) == 0 {
		prog, err := out.pinned(claude.EngineKind, agentbin.Claude, claudeMountPoint)
		if err != nil {
			return nil, fmt.Errorf("claude code: set engines.claude.command or run from the checkout: %w", err)
		}
		command = prog.Command
	}
	if err := out.registry.Register(claude.EngineKind, claude.NewAdapter(claude.Config{Command: command})); err != nil {
		return nil, err
	}

	codexCfg := codex.Config{Command: cfg.Codex.Command, Model: cfg.Codex.Model, Features: cfg.Codex.Features,
		ModelBaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", activities.OpenAIModelForwardPort)}
	if len(codexCfg.Command) == 0 {
		prog, err := out.pinned(codex.EngineKind, agentbin.Codex, codexMountPoint)
		if err != nil {
			return nil, fmt.Errorf("codex: set engines.codex.command or run from the checkout: %w", err)
		}
		codexCfg.Command, codexCfg.PathDirs = prog.Command, prog.PathDirs
	}
	out.forwards[codex.EngineKind] = sandbox.Forward{Name: activities.OpenAIModelForwardName, Port: activities.OpenAIModelForwardPort}
	if err := out.registry.Register(codex.EngineKind, codex.NewAdapter(codexCfg)); err != nil {
		return nil, err
	}

	// Pi speaks Anthropic Messages to the default model forward; its provider's base
	// URL is the forward without /v1, which Pi's client adds.
	piCfg := pi.Config{Command: cfg.Pi.Command, Model: cfg.Pi.Model,
		ModelBaseURL: fmt.Sprintf("http://127.0.0.1:%d", activities.ModelForwardPort)}
	if len(piCfg.Command) == 0 {
		prog, err := out.pinnedPi()
		if err != nil {
			return nil, fmt.Errorf("pi: set engines.pi.command or run from the checkout: %w", err)
		}
		piCfg.Command, piCfg.Version = prog.Command, prog.Version
	}
	if err := out.registry.Register(pi.EngineKind, pi.NewAdapter(piCfg)); err != nil {
		return nil, err
	}
	if err := out.registerACP(); err != nil {
		return nil, err
	}
	// A RuntimeProfile of the generic ACP kind defines its program: the API validates
	// it when saved and the worker builds its adapter from the saved profile, with no
	// restart of either.
	if err := out.registry.RegisterProgramKind(acp.KindProgram, acp.ProgramBuilder(modelBaseURL)); err != nil {
		return nil, err
	}
	if err := out.registerDeepSeekHarness(); err != nil {
		return nil, err
	}
	for i, prog := range cfg.ACPPrograms {
		if err := out.registerACPProgram(prog); err != nil {
			return nil, fmt.Errorf("engines.acp_programs[%d]: %w", i, err)
		}
	}
	if cfg.Scripted.Binary != "" {
		if err := out.registerScripted(cfg.Scripted.Binary); err != nil {
			return nil, fmt.Errorf("engines.scripted.binary: %w", err)
		}
	}
	return out, nil
}

// registerScripted registers the scripted test program, the load generator's Agent
// program: its folder is bound read-only into its boxes. It is not a product engine
// and is registered only when configured.
func (e *installedEngines) registerScripted(binary string) error {
	if err := e.registry.Register(scriptengine.Kind, &scriptengine.Adapter{BinaryPath: scriptedMountPoint + "/" + filepath.Base(binary)}); err != nil {
		return err
	}
	e.mounts[scriptengine.Kind] = []sandbox.Mount{{Source: filepath.Dir(binary), Target: scriptedMountPoint}}
	return nil
}

// pinnedPi locates the pinned Pi in the checkout and mounts its node_modules in Pi's
// boxes; Pi runs on the system's Node, which boxes see at the same path under /usr.
func (e *installedEngines) pinnedPi() (agentbin.Program, error) {
	root, err := reporoot.Find()
	if err != nil {
		return agentbin.Program{}, err
	}
	prog, err := agentbin.Locate(root, agentbin.Pi)
	if err != nil {
		return agentbin.Program{}, err
	}
	rel, err := filepath.Rel(prog.Dir, prog.Command[1])
	if err != nil {
		return agentbin.Program{}, err
	}
	e.mounts[pi.EngineKind] = []sandbox.Mount{{Source: prog.Dir, Target: piMountPoint}}
	boxed := prog
	boxed.Command = []string{prog.Command[0], filepath.Join(piMountPoint, rel)}
	return boxed, nil
}

// pinned locates the pinned release of a program in the checkout, mounts its
// install at mountPoint in the boxes of kind, and returns it with its command
// and PATH folders as the box sees them.
func (e *installedEngines) pinned(kind, name, mountPoint string) (agentbin.Program, error) {
	root, err := reporoot.Find()
	if err != nil {
		return agentbin.Program{}, err
	}
	prog, err := agentbin.Locate(root, name)
	if err != nil {
		return agentbin.Program{}, err
	}
	inBox := func(p string) (string, error) {
		rel, err := filepath.Rel(prog.Dir, p)
		if err != nil {
			return "", err
		}
		return filepath.Join(mountPoint, rel), nil
	}
	cmd, err := inBox(prog.Command[0])
	if err != nil {
		return agentbin.Program{}, err
	}
	boxed := prog
	boxed.Command = append([]string{cmd}, prog.Command[1:]...)
	boxed.PathDirs = nil
	for _, d := range prog.PathDirs {
		p, err := inBox(d)
		if err != nil {
			return agentbin.Program{}, err
		}
		boxed.PathDirs = append(boxed.PathDirs, p)
	}
	e.mounts[kind] = []sandbox.Mount{{Source: prog.Dir, Target: mountPoint}}
	return boxed, nil
}

// spec builds a box spec: the RuntimeProfile's defaults, the program's install
// and the model service reached through the box's egress. A RuntimeProfile that
// defines its ACP program names no host folder (an API user must not bind host
// paths): its program is in its image, or, in an image-less local box, in the pinned
// ACP installs the shipped ACP programs run from; its model API picks the forward.
func (e *installedEngines) spec(profile store.RuntimeProfile, agent store.Agent, adapter engines.EngineAdapter) (sandbox.Spec, error) {
	spec, err := activities.DefaultSpec(profile, agent, adapter)
	if err != nil {
		return sandbox.Spec{}, err
	}
	mounts, forward := e.mounts[agent.EngineKind], (*sandbox.Forward)(nil)
	if f, ok := e.forwards[agent.EngineKind]; ok {
		forward = &f
	}
	if e.registry.DefinesProgram(profile.EngineKind) {
		prog, err := acp.ParseProgram(profile.EngineKind, profile.ACPProgram)
		if err != nil {
			return sandbox.Spec{}, fmt.Errorf("runtime profile %s: %w", profile.ID, err)
		}
		_, forward = modelForward(prog.ModelAPI)
		mounts = nil
		if profile.Image == "" {
			mounts = e.acpMounts
		}
	}
	spec.Mounts = append(spec.Mounts, mounts...)
	if forward != nil {
		activities.AddModelEgressVia(&spec, adapter.SandboxRequest(), *forward)
	} else {
		activities.AddModelEgress(&spec, adapter.SandboxRequest())
	}
	return spec, nil
}

// modelEgress is where every box's model forwards lead: the model services with
// the real credentials, which never enter a box. Each box's forwarder process
// (sandbox/egress) holds them on the host side and outlives the worker.
func modelEgress(models config.Models) (map[string]egress.Route, error) {
	anthropic := map[string]string{}
	if models.AnthropicAPIKey.IsSet() {
		anthropic["x-api-key"] = models.AnthropicAPIKey.Reveal()
	} else {
		// The scripted model server wants a key but takes any; a real service
		// answers 401 without one, which the program reports as its own error.
		anthropic["x-api-key"] = activities.ModelPlaceholderKey
	}
	key := activities.ModelPlaceholderKey
	if models.OpenAIAPIKey.IsSet() {
		key = models.OpenAIAPIKey.Reveal()
	}
	geminiKey := activities.ModelPlaceholderKey
	if models.GeminiAPIKey.IsSet() {
		geminiKey = models.GeminiAPIKey.Reveal()
	}
	routes := map[string]egress.Route{}
	for _, r := range []struct {
		name, setting, upstream string
		headers                 map[string]string
		// paths are the model API's endpoints the programs call: the real key is
		// added to these requests only.
		paths []string
	}{
		{activities.ModelForwardName, "models.anthropic_base_url", models.AnthropicBaseURL, anthropic,
			[]string{"/v1/messages", "/v1/messages/count_tokens"}},
		{activities.OpenAIModelForwardName, "models.openai_base_url", models.OpenAIBaseURL, map[string]string{"Authorization": "Bearer " + key},
			[]string{"/v1/responses", "/v1/chat/completions", "/v1/models"}},
		// The Gemini API names the model in the path.
		{activities.GeminiModelForwardName, "models.gemini_base_url", models.GeminiBaseURL, map[string]string{"x-goog-api-key": geminiKey},
			[]string{"/v1beta/models/*:streamGenerateContent", "/v1beta/models/*:generateContent", "/v1beta/models/*:countTokens"}},
	} {
		upstream, err := url.Parse(r.upstream)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.setting, err)
		}
		route := egress.Route{Upstream: upstream.String(), Headers: r.headers, Paths: r.paths}
		if _, err := route.Proxy(); err != nil {
			return nil, fmt.Errorf("%s: %w", r.setting, err)
		}
		routes[r.name] = route
	}
	return routes, nil
}
