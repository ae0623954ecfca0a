package activities_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestClaudeCodeSendsTelemetryToTheProfilesTracingEndpoint: a Session whose
// RuntimeProfile enables tracing runs Claude Code in a box with a forward to the
// profile's endpoint (an OTLP/HTTP receiver on the host), and after a turn the
// conversation's events, metrics and spans arrive there, through the platform alone: the
// spec the worker builds, the box's forwarder and the activation's startup context.
func TestClaudeCodeSendsTelemetryToTheProfilesTracingEndpoint(t *testing.T) {
	var mu sync.Mutex
	exports := map[string][][]byte{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		exports[r.URL.Path] = append(exports[r.URL.Path], body)
		mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(receiver.Close)
	setup, _ := claudeSetup(t)
	setup.tracing, _ = json.Marshal(map[string]any{"enabled": true, "endpoint": receiver.URL + "/collector"})
	s := newStackWith(t, setup)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.send(id, "hello with tracing")
	s.eventually("the turn answered and the program idle", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.State() == store.StateReady && f.OpenResponses == 0 && s.session(id).EngineSessionKey != nil
	})
	key := *s.session(id).EngineSessionKey

	deadline := time.Now().Add(90 * time.Second)
	has := func(path string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, body := range exports[path] {
			if bytes.Contains(body, []byte(key)) {
				return true
			}
		}
		return false
	}
	s.eventually("the conversation's events, metrics and spans at the tracing endpoint", func() bool {
		require.True(t, time.Now().Before(deadline), "no telemetry of conversation %s arrived", key)
		return has("/collector/v1/logs") && has("/collector/v1/metrics") && has("/collector/v1/traces")
	})
	mu.Lock()
	defer mu.Unlock()
	for path := range exports {
		require.Contains(t, []string{"/collector/v1/logs", "/collector/v1/metrics", "/collector/v1/traces"}, path)
	}
}
