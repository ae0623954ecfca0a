package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func init() { gin.SetMode(gin.TestMode) }

func decode(t *testing.T, rec *httptest.ResponseRecorder) Envelope {
	t.Helper()
	var env Envelope
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env), rec.Body.String())
	return env
}

func do(h http.Handler, method, path string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHealthz(t *testing.T) {
	s := New(Options{Logger: zap.NewNop()})
	rec := do(s.Handler(), http.MethodGet, "/healthz", nil)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, CodeOK, decode(t, rec).Code)
}

func TestReadyzReportsEachDependency(t *testing.T) {
	dbDown := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	ok := Check{Name: "temporal", Probe: func(context.Context) error { return nil }}
	bad := Check{Name: "database", Probe: func(context.Context) error { return dbDown }}

	ready := New(Options{Logger: zap.NewNop(), Checks: []Check{ok}})
	rec := do(ready.Handler(), http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusOK, rec.Code)

	notReady := New(Options{Logger: zap.NewNop(), Checks: []Check{ok, bad}})
	rec = do(notReady.Handler(), http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	env := decode(t, rec)
	assert.Equal(t, CodeServiceUnavailable, env.Code)
	checks := env.Data.(map[string]any)["checks"].(map[string]any)
	assert.Equal(t, "ok", checks["temporal"])
	assert.Equal(t, "failed", checks["database"], "the cause stays in the logs: /readyz needs no token")
	assert.NotContains(t, rec.Body.String(), "5432")
}

func TestRequestIDOnResponseAndLogs(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := New(Options{Logger: zap.New(core)})

	rec := do(s.Handler(), http.MethodGet, "/healthz", http.Header{RequestIDHeader: {"caller-chosen-id"}})
	assert.Equal(t, "caller-chosen-id", rec.Header().Get(RequestIDHeader))

	rec = do(s.Handler(), http.MethodGet, "/healthz", nil)
	generated := rec.Header().Get(RequestIDHeader)
	assert.Len(t, generated, 24)

	entries := logs.FilterMessage("request").All()
	require.Len(t, entries, 2)
	assert.Equal(t, "caller-chosen-id", entries[0].ContextMap()["request_id"])
	assert.Equal(t, generated, entries[1].ContextMap()["request_id"])

	// An id outside the safe set or too long is replaced, never echoed.
	for _, unsafe := range []string{"id\x1b[31mred", "a b", "<script>", "ünïcode", "id\"quote", strings.Repeat("a", 129)} {
		rec = do(s.Handler(), http.MethodGet, "/healthz", http.Header{RequestIDHeader: {unsafe}})
		got := rec.Header().Get(RequestIDHeader)
		assert.NotEqual(t, unsafe, got)
		assert.Len(t, got, 24, unsafe)
	}
	rec = do(s.Handler(), http.MethodGet, "/healthz", http.Header{RequestIDHeader: {"trace-01:ab_CD.9"}})
	assert.Equal(t, "trace-01:ab_CD.9", rec.Header().Get(RequestIDHeader))
}

func TestUnknownRouteAndMethodUseTheEnvelope(t *testing.T) {
	s := New(Options{Logger: zap.NewNop()})
	rec := do(s.Handler(), http.MethodGet, "/api/v1/nothing", nil)
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Equal(t, CodeNotFound, decode(t, rec).Code)

	rec = do(s.Handler(), http.MethodPost, "/healthz", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, CodeInvalidRequest, decode(t, rec).Code)
}

func TestErrorMappingAndPanics(t *testing.T) {
	errDomain := errors.New("version conflict")
	s := New(Options{Logger: zap.NewNop(), ErrorMappers: []ErrorMapper{func(err error) (*Error, bool) {
		if errors.Is(err, errDomain) {
			return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "stale version"}, true
		}
		return nil, false
	}}})
	s.engine.GET("/mapped", func(c *gin.Context) { s.fail(c, errors.Join(errors.New("update agent"), errDomain)) })
	s.engine.GET("/internal", func(c *gin.Context) { s.fail(c, errors.New("password=hunter2 leaked detail")) })
	s.engine.GET("/invalid", func(c *gin.Context) { s.fail(c, InvalidRequest("title", "must not be empty")) })
	s.engine.GET("/panic", func(c *gin.Context) { panic("boom") })

	rec := do(s.Handler(), http.MethodGet, "/mapped", nil)
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Equal(t, CodeConflict, decode(t, rec).Code)

	rec = do(s.Handler(), http.MethodGet, "/internal", nil)
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.NotContains(t, rec.Body.String(), "hunter2", "causes stay in the logs")

	rec = do(s.Handler(), http.MethodGet, "/invalid", nil)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, "title: must not be empty", decode(t, rec).Message)

	rec = do(s.Handler(), http.MethodGet, "/panic", nil)
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, CodeInternal, decode(t, rec).Code)
}

func TestListenReportsPortInUse(t *testing.T) {
	first, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	defer first.Close()
	_, err = Listen(first.Addr().String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already in use")
	assert.Contains(t, err.Error(), first.Addr().String())
}

func TestServeStopsOnCancel(t *testing.T) {
	s := New(Options{Logger: zap.NewNop()})
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, 5e9) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
}
