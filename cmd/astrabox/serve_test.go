package main

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// databaseEnv points the binary's configuration at a test database.
func databaseEnv(t *testing.T, dsn string) []string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	password, _ := u.User.Password()
	return []string{
		"ASTRABOX_DATABASE_HOST=" + u.Hostname(),
		"ASTRABOX_DATABASE_PORT=" + u.Port(),
		"ASTRABOX_DATABASE_USER=" + u.User.Username(),
		"ASTRABOX_DATABASE_PASSWORD=" + password,
		"ASTRABOX_DATABASE_NAME=" + u.Path[1:],
		"ASTRABOX_LOG_LEVEL=warn",
	}
}

// TestServeAgainstExternalServices runs `astrabox serve` against a real
// PostgreSQL and Temporal, as a cluster deployment does: it is ready when both
// answer, refuses a schema older than itself, and names an unreachable Temporal.
func TestServeAgainstExternalServices(t *testing.T) {
	_, dsn := testutil.NewDB(t)
	temporal := testutil.TemporalDevServer(t)
	bin := buildAstrabox(t)
	port := freePorts(t, 1)[0]
	env := append(databaseEnv(t, dsn),
		"ASTRABOX_TEMPORAL_ADDRESS="+temporal.FrontendHostPort(),
		"ASTRABOX_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port),
	)

	t.Run("ready with both dependencies up", func(t *testing.T) {
		p := startProcess(t, bin, env, "serve")
		waitHTTP(t, p, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", 200)
		p.interrupt(t)
	})

	t.Run("temporal unreachable fails with a clear error", func(t *testing.T) {
		closed := freePorts(t, 1)[0]
		out, code := run(t, bin, append(env, "ASTRABOX_TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(closed), "ASTRABOX_STARTUP_TIMEOUT=1s"), "serve")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "connect to Temporal at 127.0.0.1:"+strconv.Itoa(closed))
	})

	t.Run("a schema behind the binary is refused until migrated", func(t *testing.T) {
		out, code := run(t, bin, env, "migrate", "down")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "reverted")

		out, code = run(t, bin, env, "migrate", "status")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "pending")

		out, code = run(t, bin, env, "worker")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "astrabox migrate up")

		out, code = run(t, bin, env, "migrate", "up")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "applied")
		out, code = run(t, bin, env, "migrate", "up")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "up to date")
	})

	t.Run("the API and a worker serve their metrics", func(t *testing.T) {
		metricsPort := freePorts(t, 1)[0]
		workerEnv := append(env,
			"ASTRABOX_METRICS_LISTEN=127.0.0.1:"+strconv.Itoa(metricsPort),
			"ASTRABOX_TEMPORAL_TASK_QUEUE=metrics-"+strconv.Itoa(metricsPort),
		)
		w := startProcess(t, bin, workerEnv, "worker")
		workerMetrics := "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
		// The SDK reports its pollers once the workers started; the listener may answer first.
		w.waitUntil(t, time.Minute, "the worker's Temporal SDK series", func() bool {
			return strings.Contains(httpBody(t, workerMetrics), "temporal_num_pollers")
		})
		body := httpBody(t, workerMetrics)
		assert.Contains(t, body, `astrabox_relay_lag_seconds_count{batch="admission"} 0`)
		assert.Contains(t, body, "go_goroutines")
		assert.Contains(t, body, `go_sql_max_open_connections{db_name="astrabox"} 20`)
		w.interrupt(t)

		api := startProcess(t, bin, env, "serve")
		waitHTTP(t, api, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", 200)
		body = httpBody(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics")
		assert.Contains(t, body, `astrabox_http_request_duration_seconds_count{method="GET",route="/readyz",status="200"}`)
		assert.Contains(t, body, "astrabox_custody_inputs 0")
		assert.Contains(t, body, "temporal_request_total")
		assert.Contains(t, body, `go_sql_wait_count_total{db_name="astrabox"}`)
		api.interrupt(t)
	})

	t.Run("bad migrate arguments exit 2", func(t *testing.T) {
		_, code := run(t, bin, env, "migrate", "down", "zero")
		assert.Equal(t, 2, code)
		_, code = run(t, bin, env, "migrate", "sideways")
		assert.Equal(t, 2, code)
	})
}

// httpBody returns the body of a GET, or "" when the server does not answer yet.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw)
}
