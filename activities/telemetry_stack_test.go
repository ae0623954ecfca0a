package activities_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

func metricsOf(t *telemetry.Telemetry) *telemetry.Metrics {
	if t == nil {
		return nil
	}
	return t.Metrics
}

func interceptorsOf(t *telemetry.Telemetry) []interceptor.WorkerInterceptor {
	if t == nil {
		return nil
	}
	return t.WorkerInterceptors()
}

// TestOneInputIsTracedAndMeasuredFromAPIToActivities runs the API and a worker of one
// process sharing one Telemetry, as `astrabox dev` does, against the real stack (a
// box running the scripted program): one input sent through the API yields one trace
// that spans the API request, the signal, the workflow and its activities, and the
// process's /metrics shows every platform series and the Temporal SDK's own.
func TestOneInputIsTracedAndMeasuredFromAPIToActivities(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	s := newStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"},
		mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
		prewarm: 1,
	})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := telemetry.NewWithTracer(tp, testutil.Logger(t))

	// The process's client carries the SDK's metrics and the tracing interceptor; the
	// worker made from it inherits both.
	handler, err := tel.TemporalMetricsHandler()
	require.NoError(t, err)
	interceptors, err := tel.TemporalInterceptors()
	require.NoError(t, err)
	tc, err := temporalconn.Dial(s.ctx, config.Temporal{Address: testutil.TemporalDevServer(t).FrontendHostPort(), Namespace: "default"},
		testutil.Logger(t), time.Minute, temporalconn.Instruments{MetricsHandler: handler, Interceptors: interceptors})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	s.tc, s.tel = tc, tel
	tel.Metrics.WatchBackend(s.backend, s.backend.Pool().Depths)
	tel.Metrics.WatchCustody(func(ctx context.Context) (int64, time.Duration, error) {
		c, err := s.st.GetCustody(ctx)
		return c.Held, c.OldestAge, err
	})
	s.startWorker("host-tel-" + uniq())

	srv := api.New(api.Options{
		Logger:    testutil.Logger(t).Named("api"),
		Store:     s.st,
		Output:    s.notices,
		Signaler:  &api.TemporalSignaler{Client: tc, TaskQueue: s.taskQueue, Describe: s.st.OperatorSummary},
		Registry:  s.engines,
		Telemetry: tel,
	})
	web := httptest.NewServer(srv.Handler())
	t.Cleanup(web.Close)
	_, token, err := s.st.CreateAPIToken(s.ctx, s.user.ID, "telemetry", nil)
	require.NoError(t, err)

	// The Session exists, its workflow not yet: the input's signal starts it, so the
	// workflow run and its activities belong to the input's trace.
	id := s.newSession()
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, web.URL+"/api/v1/sessions/"+id+"/inputs",
		strings.NewReader(`{"content":"slow:30:100","client_message_id":"m-1"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var receipt struct {
		Data struct {
			InputID string `json:"input_id"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&receipt))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	responseID := "resp-" + receipt.Data.InputID
	s.eventually("the response to start", func() bool { _, ok := s.response(id, responseID); return ok })
	// A follower holds the stream open while /metrics is read.
	streamCtx, stopStream := context.WithCancel(s.ctx)
	defer stopStream()
	streamReq, err := http.NewRequestWithContext(streamCtx, http.MethodGet, web.URL+"/api/v1/sessions/"+id+"/stream?after_seq=0", nil)
	require.NoError(t, err)
	streamReq.Header.Set("Authorization", "Bearer "+token)
	stream, err := http.DefaultClient.Do(streamReq)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	_, err = bufio.NewReader(stream.Body).ReadString('\n') // the stream is being served
	require.NoError(t, err)

	exposition := scrape(t, web.URL+"/metrics")
	for _, series := range []string{
		`astrabox_http_request_duration_seconds_count{method="POST",route="/api/v1/sessions/:session_id/inputs",status="200"} 1`,
		`astrabox_inputs_accepted_total 1`,
		`astrabox_inputs_admitted_total 1`,
		// A fresh Session's first input is read from custody by the runtime's bring-up.
		`astrabox_inputs_handed_over_total{source="read"} 1`,
		`astrabox_inputs_handed_over_total{source="notice"} 0`,
		`astrabox_custody_duration_seconds_count 1`,
		`astrabox_custody_inputs 0`,
		`astrabox_custody_oldest_age_seconds 0`,
		`astrabox_sse_followers 1`,
		`astrabox_boxes{state="Running"}`,
		`astrabox_prewarm_pool_ready{runtime_profile="` + s.profile.ID + `"}`,
		// The input's admission was a batch of its own kind, behind the session log's mirror.
		`astrabox_relay_lag_seconds_count{batch="admission"} 1`,
		// That admission's mirror at least, and the one after the reply ended.
		`astrabox_session_log_mirror_seconds_count`,
		`astrabox_parts_committed_total`,
		`astrabox_activity_failures_total{activity_type="ActivateRuntime"} 0`,
		// The Temporal SDK's own series, through the same registry.
		`temporal_request_total`,
		`temporal_workflow_task_execution_latency_seconds_count`,
		`temporal_activity_execution_latency_seconds_count`,
	} {
		assert.Contains(t, exposition, series)
	}
	assert.NotContains(t, exposition, "astrabox_parts_committed_total 0")
	stopStream()
	r := s.waitEnded(id, responseID)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)

	// One trace: the API request, the signal that started the workflow, the workflow
	// run, its signal handling, and the activities it ran for the input. The run's
	// span and the Relay's last until the run ends: they are started, not ended.
	var root trace.SpanContext
	for _, sp := range spans.Ended() {
		if sp.Name() == "POST /api/v1/sessions/:session_id/inputs" {
			root = sp.SpanContext()
		}
	}
	require.True(t, root.IsValid(), "the API request's span")
	names := map[string]bool{}
	for _, sp := range spans.Started() {
		if sp.SpanContext().TraceID() == root.TraceID() {
			names[sp.Name()] = true
		}
	}
	for _, want := range []string{
		"SignalWithStartWorkflow:SessionWorkflow",
		"RunWorkflow:SessionWorkflow",
		"HandleSignal:input-accepted",
		"StartActivity:PrepareRuntime", "RunActivity:PrepareRuntime",
		"StartActivity:ActivateRuntime", "RunActivity:ActivateRuntime",
		"StartActivity:Deliver", "RunActivity:Deliver",
		"StartActivity:Relay", "RunActivity:Relay",
	} {
		assert.True(t, names[want], "span %s in the input's trace; the trace holds %v", want, names)
	}
}

// scrape reads a /metrics exposition.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
