package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// A RuntimeProfile's tracing endpoint reaches a box through its own egress forward:
// the box's control service listens on TracingForwardPort of the box's loopback, and
// the host side forwards to the profile's endpoint, for the OTLP/HTTP paths alone.
// The box's metadata names the endpoint inside the box (TracingEndpointMetadata), so
// activation hands it to the program only when the box really has the forward.
const (
	TracingForwardName      = "tracing"
	TracingForwardPort      = 47082
	TracingEndpointMetadata = "tracing_endpoint"
)

// OTLPPaths are the OTLP/HTTP export paths a box may send through its tracing forward.
var OTLPPaths = []string{"/v1/traces", "/v1/metrics", "/v1/logs"}

// profileTracing is the profile's tracing configuration when it is enabled for an
// adapter that declares tracing, or false.
func profileTracing(profile store.RuntimeProfile, caps engines.EngineRuntimeCapabilities) (engines.TracingConfig, bool, error) {
	if len(profile.Tracing) == 0 || !caps.Extensions.Tracing {
		return engines.TracingConfig{}, false, nil
	}
	var cfg engines.TracingConfig
	if err := json.Unmarshal(profile.Tracing, &cfg); err != nil {
		return engines.TracingConfig{}, false, fmt.Errorf("runtime profile %s: tracing: %w", profile.ID, err)
	}
	return cfg, cfg.Enabled && cfg.Endpoint != "", nil
}

// addTracingEgress gives the box a forward to the profile's tracing endpoint when the
// profile enables tracing for an adapter that declares it, and records the endpoint
// the program uses inside the box.
func addTracingEgress(spec *sandbox.Spec, profile store.RuntimeProfile, caps engines.EngineRuntimeCapabilities) error {
	cfg, ok, err := profileTracing(profile, caps)
	if err != nil || !ok {
		return err
	}
	spec.Network.Forwards = append(spec.Network.Forwards, sandbox.Forward{
		Name: TracingForwardName, Port: TracingForwardPort, Upstream: cfg.Endpoint, Paths: slices.Clone(OTLPPaths),
	})
	if spec.Metadata == nil {
		spec.Metadata = map[string]string{}
	}
	spec.Metadata[TracingEndpointMetadata] = fmt.Sprintf("http://127.0.0.1:%d", TracingForwardPort)
	return nil
}

// boxTracingEndpoint is the endpoint inside the box behind h where the program sends
// telemetry: set when the profile enables tracing for the adapter and the box was made
// with the tracing forward, "" otherwise. A box made before the profile enabled
// tracing has no forward to send through: the program then runs without telemetry,
// and a warning says so. A box keeps the endpoint it was made with until it is
// replaced.
func (a *Activities) boxTracingEndpoint(ctx context.Context, h sandbox.Handle, profile store.RuntimeProfile, caps engines.EngineRuntimeCapabilities) (string, error) {
	_, ok, err := profileTracing(profile, caps)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConfiguration, err)
	}
	if !ok {
		return "", nil
	}
	info, err := h.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("read box %s: %w", h.ID(), err)
	}
	endpoint := info.Metadata[TracingEndpointMetadata]
	if endpoint == "" {
		a.log.Warn("tracing enabled but the box has no tracing forward; the program sends no telemetry",
			zap.String("runtime_profile", profile.ID), zap.String("box", h.ID()))
	}
	return endpoint, nil
}
