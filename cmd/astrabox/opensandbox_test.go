package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/store"
)

// TestOpenSandboxIsOfferedWhenConfigured: RuntimeProfiles may select the
// OpenSandbox backend only where the deployment configures one, and then it
// is offered with process sessions and as a backend that pulls images.
func TestOpenSandboxIsOfferedWhenConfigured(t *testing.T) {
	cfg, err := config.Load(config.Source{Environ: []string{}})
	require.NoError(t, err)
	offers := sandboxOffers(cfg)
	require.Contains(t, offers, store.SandboxLocal)
	require.NotContains(t, offers, store.SandboxOpenSandbox)
	b, err := openOpenSandbox(cfg.Sandbox.OpenSandbox, nil, true, nil)
	require.NoError(t, err)
	require.Nil(t, b, "no URL, no backend")

	cfg, err = config.Load(config.Source{Environ: []string{"ASTRABOX_SANDBOX_OPENSANDBOX_URL=https://osb.example.com/v1",
		"ASTRABOX_SANDBOX_OPENSANDBOX_API_KEY=key", "ASTRABOX_SANDBOX_OPENSANDBOX_RUNNER_KEY=0123456789abcdef-runner"}})
	require.NoError(t, err)
	offers = sandboxOffers(cfg)
	require.True(t, offers[store.SandboxOpenSandbox].SupportsProcessSessions)
	require.True(t, offers[store.SandboxOpenSandbox].RunsImageReferences)
	require.False(t, offers[store.SandboxLocal].RunsImageReferences)
	b, err = openOpenSandbox(cfg.Sandbox.OpenSandbox, nil, false, nil)
	require.NoError(t, err)
	require.NotNil(t, b)
	require.NoError(t, b.Close())

	cfg.Sandbox.OpenSandbox.CAFile = "/nonexistent/ca.pem"
	_, err = openOpenSandbox(cfg.Sandbox.OpenSandbox, nil, false, nil)
	require.ErrorContains(t, err, "sandbox.opensandbox.ca_file")
}
