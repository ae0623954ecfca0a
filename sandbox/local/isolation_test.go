package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// TestBoxesAreIsolated shows that a box cannot read another box's workspace or
// runner socket even when the host tree is shown to it, cannot write its image
// root, and runs as its own uid.
func TestBoxesAreIsolated(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)

	first, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	require.NoError(t, first.WriteFile(ctx, "/workspace/secret.txt", []byte("first box secret"), 0o644))
	// The second box is shown the whole state dir read-only, the worst case of
	// a misconfigured mount: plain Unix permissions must still hold.
	second, err := b.Create(ctx, sandbox.Spec{Mounts: []sandbox.Mount{{Source: opts.StateDir, Target: "/host-state"}}})
	require.NoError(t, err)

	firstInfo, err := first.Info(ctx)
	require.NoError(t, err)
	secondInfo, err := second.Info(ctx)
	require.NoError(t, err)
	require.NotEqual(t, firstInfo.UID, secondInfo.UID)
	require.Equal(t, strconv.Itoa(secondInfo.UID), strings.TrimSpace(string(sh(t, second, "id -u").Stdout)))

	other := "/host-state/boxes/" + first.ID()
	res := sh(t, second, "cat "+other+"/workspace/secret.txt")
	require.NotEqual(t, 0, res.ExitCode)
	require.Contains(t, string(res.Stderr), "Permission denied")
	res = sh(t, second, "ls "+other+"/workspace")
	require.Contains(t, string(res.Stderr), "Permission denied")
	res = sh(t, second, `perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "$!\n"' `+
		other+"/control/runner.sock")
	require.NotEqual(t, 0, res.ExitCode)
	require.Contains(t, string(res.Stderr), "Permission denied")
	// Without the extra mount the other box's files are not there at all.
	res = sh(t, first, "ls /host-state")
	require.Contains(t, string(res.Stderr), "No such file or directory")

	for _, path := range []string{"/x", "/usr/x", "/etc/x", "/run/x", "/run/egress/x"} {
		res := sh(t, first, "touch "+path)
		require.NotEqual(t, 0, res.ExitCode, "touch %s must fail", path)
		require.Contains(t, string(res.Stderr), "Read-only file system", path)
	}
	require.Equal(t, 0, sh(t, first, "touch /workspace/ok /tmp/ok").ExitCode)
	// Files the box makes belong to its own uid on the host.
	st, err := os.Stat(filepath.Join(b.boxDir(first.ID()), "workspace", "ok"))
	require.NoError(t, err)
	require.Equal(t, firstInfo.UID, fileUID(st))
}

// TestNetworkIsLoopbackAndForwardsOnly: a box reaches its declared forward (the
// model proxy, which adds the real key on the host side) and nothing else, and
// never sees the real key.
func TestNetworkIsLoopbackAndForwardsOnly(t *testing.T) {
	t.Parallel()
	const realKey = "sk-real-0b5c7e1d"
	var mu sync.Mutex
	var seenKeys []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenKeys = append(seenKeys, r.Header.Get("x-api-key"))
		mu.Unlock()
		_, _ = io.WriteString(w, "model says hi to "+r.URL.Path)
	}))
	defer upstream.Close()
	u, err := url.Parse(upstream.URL)
	require.NoError(t, err)

	opts := testOptions(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: u.String(), Headers: map[string]string{"x-api-key": realKey}}}
	b := newBackend(t, opts)
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{
		Env:     map[string]string{"ANTHROPIC_API_KEY": "placeholder", "ANTHROPIC_BASE_URL": "http://127.0.0.1:18080"},
		Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 18080}}},
	})
	require.NoError(t, err)

	res := sh(t, h, `curl -sS --max-time 10 -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/messages"`)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "model says hi to /v1/messages", string(res.Stdout))

	// The forwarder's socket is the runner's: the program reaches the model only
	// through the runner's loopback forward, never by connecting to the socket.
	rec := mustRecord(t, b, h.ID())
	st, err := os.Stat(filepath.Join(b.boxDir(h.ID()), "egress", "model.sock"))
	require.NoError(t, err)
	require.Equal(t, rec.RunnerUID, fileUID(st))
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	res = sh(t, h, "curl -sS --max-time 5 --unix-socket "+runnerapi.EgressDir+"/model.sock http://box/v1/messages")
	require.NotEqual(t, 0, res.ExitCode, "the program connected to the egress socket: %s", res.Stdout)
	require.Contains(t, string(res.Stderr), "curl: (7)")
	mu.Lock()
	require.Equal(t, []string{realKey}, seenKeys)
	mu.Unlock()

	// The host's own listener is not reachable: the box has its own network.
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	res = sh(t, h, fmt.Sprintf("curl -sS --max-time 5 http://%s:%s/", host, port))
	require.NotEqual(t, 0, res.ExitCode)
	res = sh(t, h, "curl -sS --max-time 5 http://1.1.1.1/")
	require.NotEqual(t, 0, res.ExitCode)
	res = sh(t, h, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	require.Equal(t, "lo", strings.TrimSpace(string(res.Stdout)))

	// The real key appears nowhere the box can look (grep exits 2 for what it
	// may not read, the runner's folder and processes among them).
	// The key goes to grep on stdin, so that grep's own command line holds no copy.
	res, err = h.Exec(ctx, sandbox.ExecRequest{Stdin: []byte(realKey),
		Argv: []string{"/bin/sh", "-c", "grep -rlsF -f - /run /workspace /tmp /proc/[0-9]*/environ /proc/[0-9]*/cmdline"}})
	require.NoError(t, err)
	require.NotEqual(t, 0, res.ExitCode, "grep found the key in: %s", res.Stdout)
	require.Empty(t, string(res.Stdout))
	res = sh(t, h, "cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n' | grep API_KEY")
	require.Equal(t, "ANTHROPIC_API_KEY=placeholder", strings.TrimSpace(strings.Split(string(res.Stdout), "\n")[0]))
}

// TestForwardToSpecUpstream: a forward whose spec names its upstream reaches that
// service with no host configuration for its name, carries only its paths, and
// never the box's credential headers.
func TestForwardToSpecUpstream(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, "collected")
	}))
	defer upstream.Close()

	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{
		{Name: "tracing", Port: 18090, Upstream: upstream.URL + "/otlp", Paths: []string{"/v1/traces"}}}}})
	require.NoError(t, err)

	res := sh(t, h, `curl -sS --max-time 10 -H "Authorization: Bearer box" -d '{}' http://127.0.0.1:18090/v1/traces`)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "collected", string(res.Stdout))
	res = sh(t, h, `curl -sS --max-time 10 -o /dev/null -w '%{http_code}' http://127.0.0.1:18090/admin`)
	require.Equal(t, "403", string(res.Stdout))
	mu.Lock()
	require.Equal(t, []string{"POST /otlp/v1/traces auth="}, seen, "only the allowed path arrived, without the box's header")
	mu.Unlock()
}

// TestPublishedPortFromWorker reaches a server inside the box from the worker
// after a readiness check, with no host port.
func TestPublishedPortFromWorker(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "web", Argv: []string{"/usr/bin/perl", "-MIO::Socket::INET", "-e",
		`$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "$!";
		 while ($c = $s->accept) { <$c>; print $c "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"; close $c }`}})
	require.NoError(t, err)
	require.NoError(t, h.WaitPort(ctx, 8080))
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return h.DialPort(ctx, 8080)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://box/", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "ok", string(body))
	_, err = h.DialPort(ctx, 8081)
	require.Error(t, err, "nothing listens on 8081")
}

func fileUID(st os.FileInfo) int { return int(st.Sys().(*syscall.Stat_t).Uid) }

// TestEgressOutlivesTheWorker: the box's forwarder is its own process, so a
// worker restart neither interrupts it nor changes it; a new worker with a new
// credential replaces it for the next requests.
func TestEgressOutlivesTheWorker(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "key="+r.Header.Get("x-api-key"))
	}))
	defer upstream.Close()
	opts := testOptions(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "k1"}}}
	first := newBackend(t, opts)
	ctx := testContext(t)
	h, err := first.Create(ctx, sandbox.Spec{Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 18080}}}})
	require.NoError(t, err)
	call := `curl -sS --max-time 10 http://127.0.0.1:18080/`
	require.Equal(t, "key=k1", string(sh(t, h, call).Stdout))
	forwarder := mustRecord(t, first, h.ID()).EgressPID

	// The worker goes away: the box and its forwarder keep running.
	require.NoError(t, first.Close())
	require.Equal(t, "key=k1", string(sh(t, h, call).Stdout), "the forward serves while no worker runs")

	// The next worker with the same configuration adopts the forwarder.
	same := newBackend(t, opts)
	require.Equal(t, forwarder, mustRecord(t, same, h.ID()).EgressPID)
	require.NoError(t, same.Close())

	// A rotated credential replaces it.
	opts.Egress = map[string]egress.Route{"model": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "k2"}}}
	second := newBackend(t, opts)
	again, err := second.Get(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, "key=k2", string(sh(t, again, call).Stdout))
	require.NotEqual(t, forwarder, mustRecord(t, second, h.ID()).EgressPID)

	// Destroying the box ends its forwarder.
	rec := mustRecord(t, second, h.ID())
	require.NoError(t, second.Destroy(ctx, h.ID()))
	require.False(t, running(rec.EgressPID, rec.EgressStart), "the forwarder ends with its box")
}

// TestModelStreamSurvivesWorkerRestart: a reply streaming through the box's
// forward while the worker (the backend) closes and a new one opens goes on to
// its end, and the forward serves new requests afterwards.
func TestModelStreamSurvivesWorkerRestart(t *testing.T) {
	t.Parallel()
	firstChunk := make(chan struct{})
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			_, _ = io.WriteString(w, "fresh")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		close(firstChunk)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	defer upstream.Close()
	opts := testOptions(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: upstream.URL, Headers: map[string]string{"x-api-key": "k"}}}
	first := newBackend(t, opts)
	ctx := testContext(t)
	h, err := first.Create(ctx, sandbox.Spec{Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 18080}}}})
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "stream", Argv: []string{"/usr/bin/curl", "-sSN", "--max-time", "50",
		"http://127.0.0.1:18080/v1/messages"}})
	require.NoError(t, err)
	select {
	case <-firstChunk:
	case <-ctx.Done():
		t.Fatal("the stream never started")
	}
	out, err := h.ReadOutput(ctx, "stream", 0, true)
	require.NoError(t, err)
	require.Equal(t, "data: first", string(readLines(t, out, 1)[0].Data))
	out.Close()

	// The worker restarts in the middle of the reply.
	require.NoError(t, first.Close())
	second := newBackend(t, opts)
	again, err := second.Get(ctx, h.ID())
	require.NoError(t, err)
	close(release)
	st, err := again.Wait(ctx, "stream")
	require.NoError(t, err)
	require.NotNil(t, st.Exit)
	require.Equal(t, 0, st.Exit.Code, "the reply ended normally")
	out, err = again.ReadOutput(ctx, "stream", 0, false)
	require.NoError(t, err)
	defer out.Close()
	var lines []string
	for {
		l, err := out.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		lines = append(lines, string(l.Data))
	}
	require.Equal(t, []string{"data: first", "", "data: last", ""}, lines, "the whole reply arrived")
	require.Equal(t, "fresh", string(sh(t, again, `curl -sS --max-time 10 http://127.0.0.1:18080/next`).Stdout))
}

// TestForwarderEndsWithItsBox: a forwarder watches its box's outer process and
// ends with it on its own, so a box that ends while no worker runs does not
// leave its forwarder behind. A stand-in process plays the box here: a backend's
// own watchers would end the forwarder first.
func TestForwarderEndsWithItsBox(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	standIn := exec.Command("/bin/sleep", "60")
	require.NoError(t, standIn.Start())
	exited := make(chan struct{})
	go func() {
		_ = standIn.Wait()
		close(exited)
	}()
	dir := t.TempDir()
	cfg := egress.ForwarderConfig{Dir: dir, UID: os.Getuid(), GID: os.Getgid(), BoxPID: standIn.Process.Pid,
		Routes: map[string]egress.Route{"model": {Upstream: "http://127.0.0.1:9"}}}
	pid, start, err := b.launchForwarder(ctx, dir, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if running(pid, start) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	require.True(t, running(pid, start))
	require.FileExists(t, filepath.Join(dir, "model.sock"))
	require.NoError(t, standIn.Process.Kill())
	<-exited
	require.Eventually(t, func() bool { return !running(pid, start) }, 20*time.Second, 20*time.Millisecond,
		"the forwarder ends once its box has")
}
