package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestDefaultSpecCarriesTheProfilesResources: a RuntimeProfile's resources
// become the box's limits, and a malformed resources object is a configuration
// error rather than an unbounded box.
func TestDefaultSpecCarriesTheProfilesResources(t *testing.T) {
	t.Parallel()
	adapter := claude.NewAdapter(claude.Config{})
	profile := store.RuntimeProfile{ID: "rp-1", Resources: json.RawMessage(`{"cpu": "500m", "memory": "1Gi", "pids": 256}`)}
	spec, err := activities.DefaultSpec(profile, store.Agent{ID: "a-1"}, adapter)
	require.NoError(t, err)
	require.Equal(t, sandbox.Limits{CPUMillis: 500, MemoryBytes: 1 << 30, Pids: 256}, spec.Limits)

	profile.Resources = json.RawMessage(`{}`)
	spec, err = activities.DefaultSpec(profile, store.Agent{ID: "a-1"}, adapter)
	require.NoError(t, err)
	require.Equal(t, sandbox.Limits{}, spec.Limits, "the backend's defaults apply")

	profile.Resources = json.RawMessage(`{"memory": "a lot"}`)
	_, err = activities.DefaultSpec(profile, store.Agent{ID: "a-1"}, adapter)
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
	require.Contains(t, err.Error(), "rp-1")
}
