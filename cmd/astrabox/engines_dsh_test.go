package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/sandbox"
)

// TestDeepSeekHarnessOfferedOnlyWhenInstalled: a checkout without tools/dsh installed
// offers no deepseek_harness; the installed one offers it, on the OpenAI model forward,
// with tools/dsh bound into its boxes.
func TestDeepSeekHarnessOfferedOnlyWhenInstalled(t *testing.T) {
	bare := &installedEngines{registry: engines.NewRegistry(), mounts: map[string][]sandbox.Mount{}, forwards: map[string]sandbox.Forward{}}
	require.NoError(t, bare.registerDeepSeekHarnessFrom(t.TempDir()))
	_, ok := bare.registry.Adapter(acp.KindDeepSeekHarness)
	require.False(t, ok, "not installed: not offered")
	require.Empty(t, bare.mounts)

	root, err := agentbin.Root()
	require.NoError(t, err)
	if _, err := agentbin.LocateDSH(root); err != nil {
		t.Skipf("tools/dsh is not installed (make deps-dsh): %v", err)
	}
	installed := &installedEngines{registry: engines.NewRegistry(), mounts: map[string][]sandbox.Mount{}, forwards: map[string]sandbox.Forward{}}
	require.NoError(t, installed.registerDeepSeekHarnessFrom(root))
	adapter, ok := installed.registry.Adapter(acp.KindDeepSeekHarness)
	require.True(t, ok)
	require.Equal(t, "DSH_HOME", adapter.Capabilities().Workload.ConfigDirEnv)
	require.Equal(t, dshMountPoint, installed.mounts[acp.KindDeepSeekHarness][0].Target)
	require.NotEmpty(t, installed.forwards[acp.KindDeepSeekHarness].Name)
}

// TestHermesIsNotOffered: Hermes cannot be installed here (docs/engines/hermes.md), so
// the built-in registry holds no hermes adapter and a RuntimeProfile selecting it is
// refused.
func TestHermesIsNotOffered(t *testing.T) {
	installed, err := newInstalledEngines(config.Engines{})
	require.NoError(t, err)
	_, ok := installed.registry.Adapter("hermes")
	require.False(t, ok)
	err = installed.registry.ValidateRuntimeProfile(engines.RuntimeProfileSpec{EngineKind: "hermes"})
	require.ErrorContains(t, err, `no engine adapter "hermes" is installed`)
}
