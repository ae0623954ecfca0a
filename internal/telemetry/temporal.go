package telemetry

import (
	"context"
	"errors"
	"fmt"

	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// TemporalMetricsHandler returns the Temporal SDK's metrics handler, exporting the
// SDK's own series (temporal_request_*, temporal_workflow_*, temporal_activity_*...)
// through OpenTelemetry into this process's registry. Set it once, on the client:
// workers take it from there.
func (t *Telemetry) TemporalMetricsHandler() (client.MetricsHandler, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(t.Metrics.registry),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal sdk metrics: %w", err)
	}
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)).Meter("temporal-sdk-go")
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                meter,
		UseMonotonicCounters: true,
		// The SDK reports a bad instrument here; a metric must never stop a worker.
		OnError: func(err error) { t.Metrics.log.Warn("temporal sdk metric", zap.Error(err)) },
	}), nil
}

// TemporalInterceptors are the client interceptors to set on the process's Temporal
// client: with tracing, OpenTelemetry's, which starts spans for the client's calls
// (SignalWithStartWorkflow...) as children of the caller's span and carries the
// trace in Temporal headers into the workflow and its activities (a client
// interceptor that is also a worker interceptor applies to the client's workers).
func (t *Telemetry) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if t.tracer == nil {
		return nil, nil
	}
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            t.tracer.Tracer("temporal-sdk-go"),
		TextMapPropagator: t.Propagator(),
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return []interceptor.ClientInterceptor{tracing}, nil
}

// WorkerInterceptors are the interceptors every worker of the process adds: the count
// of failed activity attempts by type.
func (t *Telemetry) WorkerInterceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&activityFailures{metrics: t.Metrics}}
}

// activityFailures counts activity attempts that end in an error. A cancellation (a
// Relay released with its box, a workflow that moved on) is the activity doing its
// job and is not counted.
type activityFailures struct {
	interceptor.WorkerInterceptorBase
	metrics *Metrics
}

func (a *activityFailures) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	in := &activityFailuresInbound{metrics: a.metrics}
	in.Next = next
	return in
}

type activityFailuresInbound struct {
	interceptor.ActivityInboundInterceptorBase
	metrics *Metrics
}

func (a *activityFailuresInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	// The type's series exists (at 0) from its first attempt on, so a rate over it
	// reads 0 rather than nothing while the activity succeeds.
	failures := a.metrics.ActivityFailures.WithLabelValues(activity.GetInfo(ctx).ActivityType.Name)
	out, err := a.Next.ExecuteActivity(ctx, in)
	if err != nil && !temporal.IsCanceledError(err) && !errors.Is(err, context.Canceled) {
		failures.Inc()
	}
	return out, err
}
