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

// imageAdapter is Claude Code's adapter declaring a default runtime image.
func imageAdapter(image string) *claude.Adapter {
	return claude.NewAdapter(claude.Config{DefaultRuntimeImage: image})
}

// TestDefaultSpecUsesTheEnginesDefaultImageWhenTheProfileNamesNone: a profile
// without an image gets the engine's DefaultRuntimeImage, a profile's own image wins;
// a directory is an image root (what the local backend runs), a reference an image
// URI (which it refuses by name).
func TestDefaultSpecUsesTheEnginesDefaultImageWhenTheProfileNamesNone(t *testing.T) {
	t.Parallel()
	agent := store.Agent{ID: "a-1"}
	spec, err := activities.DefaultSpec(store.RuntimeProfile{ID: "rp-1"}, agent, imageAdapter("/srv/images/claude"))
	require.NoError(t, err)
	require.Equal(t, sandbox.Image{Root: "/srv/images/claude"}, spec.Image)
	require.Equal(t, "/workspace", spec.Env[imageAdapter("").SandboxRequest().WorkingDirectoryVariable], "the working-directory variable names the workspace")

	spec, err = activities.DefaultSpec(store.RuntimeProfile{ID: "rp-1", Image: "/srv/images/mine"}, agent, imageAdapter("/srv/images/claude"))
	require.NoError(t, err)
	require.Equal(t, sandbox.Image{Root: "/srv/images/mine"}, spec.Image)

	spec, err = activities.DefaultSpec(store.RuntimeProfile{ID: "rp-1"}, agent, imageAdapter("ghcr.io/astrabox/claude:2"))
	require.NoError(t, err)
	require.Equal(t, sandbox.Image{URI: "ghcr.io/astrabox/claude:2"}, spec.Image)

	spec, err = activities.DefaultSpec(store.RuntimeProfile{ID: "rp-1"}, agent, imageAdapter(""))
	require.NoError(t, err)
	require.Equal(t, sandbox.Image{}, spec.Image, "no image anywhere: the local backend's host root")
}
