package telemetry_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
)

// collector is an OTLP/gRPC trace receiver keeping what it was sent.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	requests []*collectortrace.ExportTraceServiceRequest
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestTracesAreExportedByOTLPWhenConfigured builds telemetry from the tracing keys and
// finds its spans, with the configured service name, at an OTLP/gRPC collector.
func TestTracesAreExportedByOTLPWhenConfigured(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, time.Minute)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	recv := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, recv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	tel, err := telemetry.New(ctx, config.Tracing{OTLPEndpoint: ln.Addr().String(), OTLPInsecure: true, ServiceName: "astrabox-test", SampleRatio: 1}, testutil.Logger(t))
	require.NoError(t, err)
	require.True(t, tel.Tracing())
	_, span := tel.Tracer().Start(ctx, "one request")
	span.End()
	require.NoError(t, tel.Shutdown(ctx)) // flushes the batch

	recv.mu.Lock()
	defer recv.mu.Unlock()
	require.Len(t, recv.requests, 1)
	rs := recv.requests[0].GetResourceSpans()
	require.Len(t, rs, 1)
	var service string
	for _, kv := range rs[0].GetResource().GetAttributes() {
		if kv.GetKey() == "service.name" {
			service = kv.GetValue().GetStringValue()
		}
	}
	assert.Equal(t, "astrabox-test", service)
	require.Len(t, rs[0].GetScopeSpans(), 1)
	require.Len(t, rs[0].GetScopeSpans()[0].GetSpans(), 1)
	assert.Equal(t, "one request", rs[0].GetScopeSpans()[0].GetSpans()[0].GetName())
}

// TestNoEndpointRecordsNoSpans keeps tracing off without tracing.otlp_endpoint.
func TestNoEndpointRecordsNoSpans(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.New(context.Background(), config.Tracing{ServiceName: "astrabox", SampleRatio: 1}, testutil.Logger(t))
	require.NoError(t, err)
	assert.False(t, tel.Tracing())
	assert.Nil(t, tel.Tracer())
	interceptors, err := tel.TemporalInterceptors()
	require.NoError(t, err)
	assert.Empty(t, interceptors)
}
