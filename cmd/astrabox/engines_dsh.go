package main

import (
	"fmt"
	"path/filepath"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/sandbox"
)

// dshMountPoint is where local boxes see tools/dsh.
const dshMountPoint = "/opt/astrabox/dsh"

// registerDeepSeekHarness registers DeepSeek Harness (deepseek_harness) when the
// checkout has it installed (make deps-dsh), run through the ACP adapter from tools/dsh
// bound read-only into local boxes, on the OpenAI model forward. Without the install the
// kind is not offered: the registry offers no program that cannot run.
func (e *installedEngines) registerDeepSeekHarness() error {
	root, err := reporoot.Find()
	if err != nil {
		return nil
	}
	return e.registerDeepSeekHarnessFrom(root)
}

func (e *installedEngines) registerDeepSeekHarnessFrom(root string) error {
	inst, err := agentbin.LocateDSH(root)
	if err != nil {
		// Not installed, or not the pinned release: not offered.
		return nil
	}
	nodeRel, err := filepath.Rel(inst.Root, inst.Node)
	if err != nil {
		return err
	}
	profile := acp.DeepSeekHarnessProfile(acp.DSHInstall{Node: filepath.Join(dshMountPoint, nodeRel), Root: dshMountPoint})
	adapter, err := acp.NewAdapter(acp.Config{Profile: profile,
		ModelBaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", activities.OpenAIModelForwardPort)})
	if err != nil {
		return err
	}
	if err := e.registry.Register(profile.Kind, adapter); err != nil {
		return err
	}
	e.mounts[profile.Kind] = []sandbox.Mount{{Source: inst.Root, Target: dshMountPoint}}
	e.forwards[profile.Kind] = sandbox.Forward{Name: activities.OpenAIModelForwardName, Port: activities.OpenAIModelForwardPort}
	return nil
}
