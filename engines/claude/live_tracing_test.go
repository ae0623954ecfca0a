package claude_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/enginebox"
)

// otlpReceiver is an OTLP/HTTP collector: it records every export it is sent.
type otlpReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	exports []otlpExport
	arrived chan struct{}
}

type otlpExport struct {
	Method, Path, ContentType string
	Body                      []byte
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rcv := &otlpReceiver{arrived: make(chan struct{}, 1)}
	rcv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rcv.mu.Lock()
		rcv.exports = append(rcv.exports, otlpExport{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Body: body})
		rcv.mu.Unlock()
		select {
		case rcv.arrived <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(rcv.srv.Close)
	return rcv
}

func (rcv *otlpReceiver) snapshot() []otlpExport {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return append([]otlpExport(nil), rcv.exports...)
}

// waitFor waits until the exports received so far satisfy done.
func (rcv *otlpReceiver) waitFor(t *testing.T, what string, done func([]otlpExport) bool) []otlpExport {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		if got := rcv.snapshot(); done(got) {
			return got
		}
		select {
		case <-rcv.arrived:
		case <-timeout:
			t.Fatalf("waiting for %s: received %d exports", what, len(rcv.snapshot()))
		}
	}
}

func hasExport(path, text string) func([]otlpExport) bool {
	return func(exports []otlpExport) bool {
		for _, x := range exports {
			if x.Path == path && bytes.Contains(x.Body, []byte(text)) {
				return true
			}
		}
		return false
	}
}

// TestLiveTelemetryReachesTheTracingEndpoint runs the real Claude Code in two boxes,
// one made with a forward to a RuntimeProfile's tracing endpoint (an OTLP/HTTP
// receiver on the host) and one without. The traced conversation's metrics, events
// and spans arrive at the receiver over OTLP/HTTP JSON, naming its conversation; the
// untraced box has no tracing forward, and nothing of its conversation arrives.
func TestLiveTelemetryReachesTheTracingEndpoint(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	rcv := newOTLPReceiver(t)

	// The untraced conversation runs first: whatever it sent would be there before
	// the traced one's exports.
	plainHandle, plainBox := e.newBox()
	plainSC := engines.EngineStartupContext{SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: plainBox.ID()}
	plain, err := e.adapter.ActivateRuntime(ctx, plainSC, plainBox)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.EngineClient.Close() })
	pr := enginetest.StartLiveReader(t, ctx, plain.EngineClient, nil)
	require.NoError(t, plain.EngineClient.Submit(ctx, engines.TextInput(uuidFor(t), "hello without tracing")))
	require.Equal(t, engines.OutcomeCompleted, pr.Ended().Outcome)
	res, err := plainHandle.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c",
		"curl -sS --max-time 5 -d '{}' http://127.0.0.1:47082/v1/logs"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, res.ExitCode, "a box without tracing reached a tracing forward: %s", res.Stdout)

	traced := e.spec
	traced.Network.Forwards = append(append([]sandbox.Forward(nil), e.spec.Network.Forwards...), sandbox.Forward{
		Name: activities.TracingForwardName, Port: activities.TracingForwardPort,
		Upstream: rcv.srv.URL, Paths: activities.OTLPPaths,
	})
	h, err := e.backend.Create(ctx, traced)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	box := enginebox.New(h)
	sc := engines.EngineStartupContext{SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID(),
		TracingEndpoint: "http://127.0.0.1:47082"}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.EngineClient.Close() })
	key := rt.EngineClient.EngineSessionKey()
	r := enginetest.StartLiveReader(t, ctx, rt.EngineClient, nil)
	require.NoError(t, rt.EngineClient.Submit(ctx, engines.TextInput(uuidFor(t), "hello with tracing")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)

	// The turn's events (OTLP logs), metrics and spans, each naming the conversation.
	exports := rcv.waitFor(t, "the turn's events, metrics and spans", func(x []otlpExport) bool {
		return hasExport("/v1/logs", key)(x) && hasExport("/v1/metrics", key)(x) && hasExport("/v1/traces", key)(x)
	})
	require.True(t, hasExport("/v1/logs", "claude_code.user_prompt")(exports), "the prompt event is exported")
	require.True(t, hasExport("/v1/logs", "claude_code.api_request")(exports), "the model request event is exported")
	require.True(t, hasExport("/v1/traces", "claude_code.llm_request")(exports), "the model request span is exported")
	for _, x := range exports {
		require.Equal(t, http.MethodPost, x.Method)
		require.Contains(t, x.ContentType, "application/json", "OTLP/HTTP JSON")
		require.Contains(t, activities.OTLPPaths, x.Path)
		require.NotContains(t, string(x.Body), plainSC.SessionID)
		require.False(t, strings.Contains(string(x.Body), plain.EngineClient.EngineSessionKey()),
			"the untraced conversation sent telemetry: %s", x.Body)
	}
}
