package main

import (
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/store"
)

// claudeMountPoint is where local boxes see the pinned Claude Code release.
const claudeMountPoint = "/opt/astrabox/claude"

// installedEngines is the process's one engine registry and what boxes need
// to run its programs.
type installedEngines struct {
	registry *engines.Registry
	// mounts are the program installs bound into boxes, by engine kind.
	mounts map[string][]sandbox.Mount
}

// newInstalledEngines registers the Agent programs this build ships. Claude
// Code runs from the configured command, or else from the pinned release in
// tools/agents, bound read-only into local boxes.
func newInstalledEngines(cfg config.Engines) (*installedEngines, error) {
	out := &installedEngines{registry: engines.NewRegistry(), mounts: map[string][]sandbox.Mount{}}
	command := cfg.Claude.Command
	if len(command) == 0 {
		root, err := reporoot.Find()
		if err != nil {
			return nil, fmt.Errorf("claude code: set engines.claude.command or run from the checkout: %w", err)
		}
		prog, err := agentbin.Locate(root, agentbin.Claude)
		if err != nil {
			return nil, fmt.Errorf("claude code: %w", err)
		}
		rel, err := filepath.Rel(prog.Dir, prog.Command[0])
		if err != nil {
			return nil, fmt.Errorf("claude code: %w", err)
		}
		command = append([]string{filepath.Join(claudeMountPoint, rel)}, prog.Command[1:]...)
		out.mounts[claude.EngineKind] = []sandbox.Mount{{Source: prog.Dir, Target: claudeMountPoint}}
	}
	if err := out.registry.Register(claude.EngineKind, claude.NewAdapter(claude.Config{Command: command})); err != nil {
		return nil, err
	}
	return out, nil
}

// spec builds a box spec: the RuntimeProfile's defaults, the program's install
// and the model service reached through the box's egress.
func (e *installedEngines) spec(profile store.RuntimeProfile, agent store.Agent, adapter engines.EngineAdapter) (sandbox.Spec, error) {
	spec, err := activities.DefaultSpec(profile, agent, adapter)
	if err != nil {
		return sandbox.Spec{}, err
	}
	spec.Mounts = append(spec.Mounts, e.mounts[agent.EngineKind]...)
	activities.AddModelEgress(&spec, adapter.SandboxRequest())
	return spec, nil
}

// modelEgress is where every box's model forward leads: the model service with
// the real credential, which never enters a box. Each box's forwarder process
// (sandbox/egress) holds it on the host side and outlives the worker.
func modelEgress(models config.Models) (map[string]egress.Route, error) {
	upstream, err := url.Parse(models.AnthropicBaseURL)
	if err != nil {
		return nil, fmt.Errorf("models.anthropic_base_url: %w", err)
	}
	headers := map[string]string{}
	if models.AnthropicAPIKey.IsSet() {
		headers["x-api-key"] = models.AnthropicAPIKey.Reveal()
	} else {
		// The scripted model server wants a key but takes any; a real service
		// answers 401 without one, which the program reports as its own error.
		headers["x-api-key"] = activities.ModelPlaceholderKey
	}
	route := egress.Route{Upstream: upstream.String(), Headers: headers}
	if _, err := route.Proxy(); err != nil {
		return nil, fmt.Errorf("models.anthropic_base_url: %w", err)
	}
	return map[string]egress.Route{activities.ModelForwardName: route}, nil
}
