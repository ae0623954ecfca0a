package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/claude"
)

// TestConfiguredACPProgramRegisters adds an ACP program by configuration alone: the
// registry validates it and the kind is offered; a bad profile stops the start, naming
// the entry and the field.
func TestConfiguredACPProgramRegisters(t *testing.T) {
	prog := config.ACPProgram{Kind: "my-agent", Command: []string{"/opt/my-agent/bin/my-agent", "--acp"},
		ModelKeyEnv: "OPENAI_API_KEY", ModelAPI: "openai", StateDir: ".my-agent", Busy: "queued",
		Admission: "prompt_reply", Resume: "load", Modes: []string{"ask", "auto"}, DefaultMode: "ask",
		Mounts: []config.ACPMount{{Source: "/opt/my-agent", Target: "/opt/my-agent"}}}
	installed, err := newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{prog}})
	require.NoError(t, err)
	adapter, ok := installed.registry.Adapter("my-agent")
	require.True(t, ok)
	require.Equal(t, []string{"ask", "auto"}, adapter.Capabilities().PermissionModes)
	require.Equal(t, acp.BusyQueued, adapter.(*acp.Adapter).Profile().Busy)
	require.NotEmpty(t, installed.forwards["my-agent"], "an OpenAI program gets the OpenAI forward")
	require.Len(t, installed.mounts["my-agent"], 1)

	bad := prog
	bad.Busy = "sometimes"
	_, err = newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{bad}})
	require.ErrorContains(t, err, "engines.acp_programs[0]")
	require.ErrorContains(t, err, "busy")

	clash := prog
	clash.Kind = claude.EngineKind
	_, err = newInstalledEngines(config.Engines{ACPPrograms: []config.ACPProgram{clash}})
	require.Error(t, err, "a configured program cannot take a built-in kind")
}
