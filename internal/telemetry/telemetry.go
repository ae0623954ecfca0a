// Package telemetry owns a process's observability: its one Prometheus registry
// (the platform's series, the Go runtime's and the Temporal SDK's) and its
// OpenTelemetry tracer provider, with the Temporal interceptors that carry a trace
// from an API request through the workflow signal into the workflow and its
// activities. cmd builds one Telemetry per process and hands its parts to the API,
// the Temporal client and the workers; nothing here is global.
package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/config"
)

// TracerName names the spans AstraBox itself starts (API requests).
const TracerName = "github.com/astrabox/astrabox"

// Telemetry is one process's metrics and traces.
type Telemetry struct {
	Metrics *Metrics
	// tracer is nil when no traces are recorded (tracing.otlp_endpoint empty).
	tracer   trace.TracerProvider
	shutdown func(context.Context) error
}

// New builds the process's telemetry from configuration: metrics always, traces
// exported by OTLP/gRPC when tracing.otlp_endpoint is set.
func New(ctx context.Context, cfg config.Tracing, log *zap.Logger) (*Telemetry, error) {
	t := &Telemetry{Metrics: NewMetrics(log.Named("metrics")), shutdown: func(context.Context) error { return nil }}
	if cfg.OTLPEndpoint == "" {
		return t, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint)}
	if cfg.OTLPInsecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing.otlp_endpoint %s: %w", cfg.OTLPEndpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	t.tracer = tp
	t.shutdown = tp.Shutdown
	return t, nil
}

// NewWithTracer builds telemetry that records spans with tp (tests use an in-memory
// exporter).
func NewWithTracer(tp trace.TracerProvider, log *zap.Logger) *Telemetry {
	return &Telemetry{Metrics: NewMetrics(log), tracer: tp, shutdown: func(context.Context) error { return nil }}
}

// Tracing reports whether spans are recorded.
func (t *Telemetry) Tracing() bool { return t.tracer != nil }

// Tracer returns the tracer of AstraBox's own spans, or nil when none are recorded.
func (t *Telemetry) Tracer() trace.Tracer {
	if t.tracer == nil {
		return nil
	}
	return t.tracer.Tracer(TracerName)
}

// Propagator reads and writes W3C trace context and baggage, as the Temporal
// interceptor does, so a caller's traceparent header continues its trace.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Shutdown flushes the spans not exported yet.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
