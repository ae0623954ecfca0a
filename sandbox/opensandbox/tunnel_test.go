package opensandbox

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// upstream is a service behind the worker's egress that records what reached it.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "path key" per request
}

func newUpstream(t *testing.T, answer string) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r.URL.Path+" "+r.Header.Get("x-api-key"))
		u.mu.Unlock()
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// loopbackPort is a free port: the fake's boxes share the host's loopback,
// where each box of a real server has its own.
func loopbackPort(t *testing.T) int {
	port, err := freeport.Reserve()
	require.NoError(t, err)
	return port
}

// curl runs curl in the box as the program, with the placeholder key a
// program holds, and returns what it printed.
func curl(ctx context.Context, t *testing.T, h sandbox.Handle, url string) string {
	t.Helper()
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/usr/bin/curl", "-sS", "-H", "x-api-key: placeholder", "-d", "{}", url}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "curl %s: %s", url, res.Stderr)
	return string(res.Stdout)
}

func modelSpec(model, tracing int, tracingURL string) sandbox.Spec {
	spec := testSpec()
	spec.Network.Forwards = []sandbox.Forward{{Name: "model", Port: model},
		{Name: "tracing", Port: tracing, Upstream: tracingURL, Paths: []string{"/v1/traces"}}}
	return spec
}

// TestForwardsReachTheWorkersEgressThroughTheTunnel: a program in a remote box
// reaches the model service on its loopback forward; the worker adds the real
// credential (the box holds only a placeholder, and no variable of the box has
// the credential), paths the route does not allow are refused on the worker,
// and a forward with its own upstream (tracing) leads there with no credential.
func TestForwardsReachTheWorkersEgressThroughTheTunnel(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	model, tracing := newUpstream(t, "model answered"), newUpstream(t, "traced")
	opts := testOptions(t, f)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL, Headers: map[string]string{"x-api-key": "sk-worker-side"},
		Paths: []string{"/v1/messages"}}}
	b := newBackend(t, opts)
	ctx := testContext(t)
	mp, tp := loopbackPort(t), loopbackPort(t)
	h, err := b.Create(ctx, modelSpec(mp, tp, tracing.URL))
	require.NoError(t, err)
	defer b.Destroy(ctx, h.ID())

	require.Equal(t, "model answered", curl(ctx, t, h, fmt.Sprintf("http://127.0.0.1:%d/v1/messages", mp)))
	require.Equal(t, []string{"/v1/messages sk-worker-side"}, model.requests(), "the credential is the worker's, not the box's")
	require.Contains(t, curl(ctx, t, h, fmt.Sprintf("http://127.0.0.1:%d/admin", mp)), "path not allowed")
	require.Len(t, model.requests(), 1, "a refused path never reaches the model")
	require.Equal(t, "traced", curl(ctx, t, h, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", tp)))
	require.Equal(t, []string{"/v1/traces "}, tracing.requests(), "a forward with its own upstream carries no credential")

	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/usr/bin/env"}})
	require.NoError(t, err)
	require.NotContains(t, string(res.Stdout), "sk-worker-side")
	require.NotContains(t, string(res.Stdout), runnerapi.EnvForwards)
}

// TestANewWorkerTakesTheTunnelOver: a worker that takes a box over (a restarted
// worker's Get) replaces the tunnel; the one before is told so and stops,
// instead of taking the tunnel back, and the box's requests are served by the
// new worker, with its credential, also after the old one is gone.
func TestANewWorkerTakesTheTunnelOver(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	model, tracing := newUpstream(t, "ok"), newUpstream(t, "traced")
	opts := testOptions(t, f)
	route := func(key string) map[string]egress.Route {
		return map[string]egress.Route{"model": {Upstream: model.URL, Headers: map[string]string{"x-api-key": key}}}
	}
	opts.Egress = route("sk-first-worker")
	first := newBackend(t, opts)
	ctx := testContext(t)
	mp := loopbackPort(t)
	h, err := first.Create(ctx, modelSpec(mp, loopbackPort(t), tracing.URL))
	require.NoError(t, err)
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/messages", mp)
	curl(ctx, t, h, url)

	opts.Egress = route("sk-second-worker")
	second := newBackend(t, opts)
	h2, err := second.Get(ctx, h.ID())
	require.NoError(t, err)
	defer second.Destroy(ctx, h2.ID())
	require.Eventually(t, func() bool { return first.heldTunnels() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the first worker stops holding the tunnel")
	curl(ctx, t, h2, url)
	require.NoError(t, first.Close())
	curl(ctx, t, h2, url)
	require.Equal(t, []string{"/v1/messages sk-first-worker", "/v1/messages sk-second-worker", "/v1/messages sk-second-worker"},
		model.requests())
}

// TestTheProgramCannotOpenTheTunnel: a program in the box finds the runner's
// port but, without the runner's token (which it cannot read), cannot take the
// tunnel, read the box's forwards, or reach any other forward through one.
func TestTheProgramCannotOpenTheTunnel(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	model, tracing := newUpstream(t, "ok"), newUpstream(t, "traced")
	opts := testOptions(t, f)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL}}
	b := newBackend(t, opts)
	ctx := testContext(t)
	h, err := b.Create(ctx, modelSpec(loopbackPort(t), loopbackPort(t), tracing.URL))
	require.NoError(t, err)
	defer b.Destroy(ctx, h.ID())
	ep, err := b.api.endpoint(ctx, h.ID(), b.opts.RunnerPort, false)
	require.NoError(t, err)
	for _, path := range []string{runnerapi.TunnelPath, runnerapi.TunnelForwardsPath} {
		res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
			"-H", "Connection: Upgrade", "-H", "Upgrade: yamux", "http://" + ep.Endpoint + path}})
		require.NoError(t, err)
		require.Equal(t, "401", string(res.Stdout), "the program reaches %s without the token", path)
	}
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "cat /proc/$PPID/environ"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, res.ExitCode, "the runner's environment is not the program's to read")
	require.Contains(t, string(res.Stderr), "Permission denied")
}

// TestForgedForwardsAreNotServed: a worker taking a box over serves only the
// forwards the box was made with: a runner that reports others (one leading
// to an address of the worker's network) is refused.
func TestForgedForwardsAreNotServed(t *testing.T) {
	t.Parallel()
	const nonce = "0123456789abcdef"
	b := &Backend{opts: Options{RunnerKey: []byte("0123456789abcdef-test-runner-key"), Egress: map[string]egress.Route{
		"model": {Upstream: "http://model.internal"}}}}
	made := `[{"name":"model","port":47080}]`
	forged := `[{"name":"model","port":47080},{"name":"meta","port":47090,"upstream":"http://169.254.169.254"}]`
	mac := b.forwardsMAC(nonce, made)
	for raw, ok := range map[string]bool{made: true, forged: false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintf(w, `{"forwards":%q}`, raw)
		}))
		routes, err := b.tunnelRoutes(context.Background(), runnerapi.NewHTTPClient(srv.URL, "token", srv.Client()), nonce, mac, nil)
		srv.Close()
		if ok {
			require.NoError(t, err)
			require.Len(t, routes, 1)
		} else {
			require.ErrorIs(t, err, errForwardsForged, strings.TrimSpace(raw))
		}
	}
}
