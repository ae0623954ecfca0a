package main

import (
	"fmt"
	"path/filepath"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/sandbox"
)

// geminiURL is the Gemini API forward as a box's program reaches it; the Gemini SDK
// adds the version (/v1beta) itself.
var geminiURL = fmt.Sprintf("http://127.0.0.1:%d", activities.GeminiModelForwardPort)

// modelForward is where a program speaking api reaches the model service in its box:
// the {model_base_url} it is given, and the forward that serves it (nil: the default,
// Anthropic, forward). An unknown API is one acp.Program.Validate refuses; it gets the
// default.
func modelForward(api acp.ModelAPI) (string, *sandbox.Forward) {
	switch api {
	case acp.ModelAPIOpenAI:
		return fmt.Sprintf("http://127.0.0.1:%d/v1", activities.OpenAIModelForwardPort),
			&sandbox.Forward{Name: activities.OpenAIModelForwardName, Port: activities.OpenAIModelForwardPort}
	case acp.ModelAPIGemini:
		return geminiURL, &sandbox.Forward{Name: activities.GeminiModelForwardName, Port: activities.GeminiModelForwardPort}
	}
	return fmt.Sprintf("http://127.0.0.1:%d", activities.ModelForwardPort), nil
}

// modelBaseURL is the {model_base_url} of a program speaking api.
func modelBaseURL(api acp.ModelAPI) string {
	url, _ := modelForward(api)
	return url
}

// registerACPProgram registers an ACP program the configuration declares; the profile
// is validated by the adapter and the capabilities by the registry.
func (e *installedEngines) registerACPProgram(c config.ACPProgram) error {
	prog := acp.Program{Title: c.Title, Command: c.Command, Env: c.Env, Files: c.Files, ModelKeyEnv: c.ModelKeyEnv,
		ModelAPI: acp.ModelAPI(c.ModelAPI), StateDir: c.StateDir, StateDirEnv: c.StateDirEnv, SessionLog: c.SessionLog,
		StateFiles: c.StateFiles, Modes: c.Modes, DefaultMode: c.DefaultMode, Busy: acp.BusyPrompt(c.Busy),
		Admission: acp.Admission(c.Admission), Resume: acp.ResumeMethod(c.Resume), InstructionsFile: c.InstructionsFile,
		ModeUpdateText: c.ModeUpdateText, LoadAfterStartMinute: c.LoadAfterStartMinute, NewSessionMeta: c.NewSessionMeta}
	for _, t := range c.MCPTransports {
		prog.MCPTransports = append(prog.MCPTransports, engines.MCPTransport(t))
	}
	adapter, err := acp.NewProgramAdapter(c.Kind, prog, modelBaseURL)
	if err != nil {
		return err
	}
	if err := e.registry.Register(c.Kind, adapter); err != nil {
		return err
	}
	if _, f := modelForward(prog.ModelAPI); f != nil {
		e.forwards[c.Kind] = *f
	}
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return fmt.Errorf("mount %q -> %q: both must be absolute paths", m.Source, m.Target)
		}
		e.mounts[c.Kind] = append(e.mounts[c.Kind], sandbox.Mount{Source: m.Source, Target: m.Target})
	}
	return nil
}

// registerACP registers the shipped ACP programs when the checkout has them installed
// (make deps-acp-agents), each under its own engine_kind, run from the pinned installs
// bound read-only into local boxes; the same installs are what an image-less local box
// of a RuntimeProfile defining its own ACP program gets. A build without them serves
// the other programs.
func (e *installedEngines) registerACP() error {
	root, err := reporoot.Find()
	if err != nil {
		return nil
	}
	inst, err := agentbin.LocateACP(root)
	if err != nil {
		return nil
	}
	claudeProg, err := agentbin.Locate(root, agentbin.Claude)
	if err != nil {
		return nil
	}
	codexProg, err := agentbin.Locate(root, agentbin.Codex)
	if err != nil {
		return nil
	}
	codexRel, err := filepath.Rel(codexProg.Dir, codexProg.Command[0])
	if err != nil {
		return err
	}
	in := acp.Install{Node: inst.Node, Modules: acpMountPoint, Opencode: filepath.Join(acpMountPoint, inst.Opencode),
		ClaudeCode: filepath.Join(claudeMountPoint, filepath.Base(claudeProg.Command[0])), Codex: filepath.Join(codexMountPoint, codexRel)}
	mounts := []sandbox.Mount{{Source: inst.Modules, Target: acpMountPoint}, {Source: claudeProg.Dir, Target: claudeMountPoint},
		{Source: codexProg.Dir, Target: codexMountPoint}}
	for _, shipped := range []struct {
		profile acp.Profile
		api     acp.ModelAPI
	}{
		{acp.ClaudeProfile(in), acp.ModelAPIAnthropic},
		{acp.CodexProfile(in), acp.ModelAPIOpenAI},
		{acp.QwenProfile(in), acp.ModelAPIOpenAI},
		{acp.OpencodeProfile(in), acp.ModelAPIOpenAI},
		{acp.GeminiProfile(in), acp.ModelAPIGemini},
	} {
		baseURL, forward := modelForward(shipped.api)
		adapter, err := acp.NewAdapter(acp.Config{Profile: shipped.profile, ModelBaseURL: baseURL})
		if err != nil {
			return err
		}
		kind := shipped.profile.Kind
		if err := e.registry.Register(kind, adapter); err != nil {
			return err
		}
		e.mounts[kind] = mounts
		if forward != nil {
			e.forwards[kind] = *forward
		}
	}
	e.acpMounts = mounts
	return nil
}
