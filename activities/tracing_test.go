package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestDefaultSpecForwardsToTheProfilesTracingEndpoint: a profile that enables tracing
// for an engine that declares it gives the box a forward to its endpoint, for the OTLP
// paths alone, and names the endpoint inside the box; disabled tracing, or an engine
// without it, gives the box no such forward.
func TestDefaultSpecForwardsToTheProfilesTracingEndpoint(t *testing.T) {
	t.Parallel()
	agent := store.Agent{ID: "a-1"}
	profile := store.RuntimeProfile{ID: "rp-1", Tracing: json.RawMessage(`{"enabled": true, "endpoint": "https://collector.example:4318"}`)}
	spec, err := activities.DefaultSpec(profile, agent, claude.NewAdapter(claude.Config{}))
	require.NoError(t, err)
	require.Equal(t, []sandbox.Forward{{Name: activities.TracingForwardName, Port: activities.TracingForwardPort,
		Upstream: "https://collector.example:4318", Paths: []string{"/v1/traces", "/v1/metrics", "/v1/logs"}}}, spec.Network.Forwards)
	require.Equal(t, "http://127.0.0.1:47082", spec.Metadata[activities.TracingEndpointMetadata])
	require.NoError(t, spec.WithDefaults().Validate())

	for name, p := range map[string]store.RuntimeProfile{
		"disabled":   {ID: "rp-2", Tracing: json.RawMessage(`{"enabled": false, "endpoint": "https://collector.example:4318"}`)},
		"no tracing": {ID: "rp-3"},
	} {
		spec, err := activities.DefaultSpec(p, agent, claude.NewAdapter(claude.Config{}))
		require.NoError(t, err, name)
		require.Empty(t, spec.Network.Forwards, name)
		require.NotContains(t, spec.Metadata, activities.TracingEndpointMetadata, name)
	}
	spec, err = activities.DefaultSpec(profile, agent, codex.NewAdapter(codex.Config{}))
	require.NoError(t, err)
	require.Empty(t, spec.Network.Forwards, "an engine that does not declare tracing gets no forward")
}
