package pi

import (
	"context"
	"fmt"
	"path"

	"github.com/astrabox/astrabox/engines"
)

// The Agent configuration Pi takes, in its agent folder (PI_CODING_AGENT_DIR), where Pi
// discovers both at start: Skills as skills/<name>/SKILL.md (the Agent Skills layout)
// and standing instructions as the global AGENTS.md. Pi has no MCP client; its
// packages install from the network at start, which a prepared box must not do; and
// its settings.json is not offered. Saving an Agent that sets any of those is refused.
const (
	SkillsDir        = "skills"
	InstructionsFile = "AGENTS.md"
)

// extensions is what an Agent may configure for Pi.
func extensions() engines.EngineExtensions {
	return engines.EngineExtensions{
		Skills:           &engines.SkillsDiscovery{Directories: []string{SkillsDir}},
		InstructionsFile: InstructionsFile,
	}
}

// writeAgentConfig writes the Agent's Skills and instructions into Pi's agent folder
// before Pi starts. The instructions file is written even when empty, so instructions
// the Agent no longer has stop at the next start.
func writeAgentConfig(ctx context.Context, sc engines.EngineStartupContext, box engines.Box, paths Paths) error {
	write := func(name string, data []byte) error {
		if err := box.WriteFile(ctx, sc.RuntimeIdentity, name, data, 0o600); err != nil {
			return fmt.Errorf("write agent configuration %s: %w", name, err)
		}
		return nil
	}
	if err := write(path.Join(paths.AgentDir, InstructionsFile), []byte(sc.AgentConfig.Instructions)); err != nil {
		return err
	}
	for _, s := range sc.AgentConfig.Skills {
		if err := write(path.Join(paths.AgentDir, SkillsDir, s.Name, "SKILL.md"), engines.SkillDocument(s)); err != nil {
			return err
		}
	}
	return nil
}
