package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/telemetry"
)

// TestRequestsAreMeasuredAndTraced checks the observe middleware: latency by route
// template (one label for every unmatched path), a server span per request that
// continues the caller's traceparent, and /metrics serving the registry.
func TestRequestsAreMeasuredAndTraced(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tel := telemetry.NewWithTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), zaptest.NewLogger(t))
	s := New(Options{Logger: zaptest.NewLogger(t), Telemetry: tel})

	const parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Header.Set("traceparent", "00-"+parentTrace+"-00f067aa0ba902b7-01")
	s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	for _, path := range []string{"/no/such/route/1", "/no/such/route/2"} {
		s.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}

	ended := spans.Ended()
	require.Len(t, ended, 3)
	assert.Equal(t, "GET /healthz", ended[0].Name())
	assert.Equal(t, parentTrace, ended[0].SpanContext().TraceID().String(), "the caller's trace continues")
	assert.Equal(t, "GET unmatched", ended[1].Name())

	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `astrabox_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1`)
	assert.Contains(t, string(body), `astrabox_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"} 2`)
}
