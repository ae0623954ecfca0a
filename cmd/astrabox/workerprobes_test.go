package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
)

// switchableForwarder relays TCP to a target while up; while down it drops
// every connection it carries and refuses new ones, as a partitioned network
// would.
type switchableForwarder struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newSwitchableForwarder(t *testing.T, target string) *switchableForwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &switchableForwarder{ln: ln, target: target, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.relay(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		f.setDown(true)
	})
	return f
}

func (f *switchableForwarder) addr() string { return f.ln.Addr().String() }

func (f *switchableForwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false
	}
	for _, c := range conns {
		f.conns[c] = true
	}
	return true
}

func (f *switchableForwarder) relay(in net.Conn) {
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	go func() { _, _ = io.Copy(out, in); out.Close() }()
	_, _ = io.Copy(in, out)
	in.Close()
}

// setDown cuts (true) or restores (false) the link.
func (f *switchableForwarder) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		for c := range f.conns {
			c.Close()
		}
		f.conns = map[net.Conn]bool{}
	}
}

type probeAnswer struct {
	status     int
	retryAfter string
	Code       string `json:"code"`
	Data       struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	} `json:"data"`
}

func getProbe(t *testing.T, url string) probeAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var a probeAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	return a
}

// TestTheWorkerServesItsProbes runs `astrabox worker` against a real PostgreSQL
// and Temporal, as a cluster deployment does: on metrics.listen it is live while
// it serves, ready while both dependencies answer, and names Temporal when the
// link to it is cut; readiness comes back with the link.
func TestTheWorkerServesItsProbes(t *testing.T) {
	_, dsn := testutil.NewDB(t)
	temporal := testutil.TemporalDevServer(t)
	link := newSwitchableForwarder(t, temporal.FrontendHostPort())
	bin := buildAstrabox(t)
	probes := "http://127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	env := append(databaseEnv(t, dsn),
		"ASTRABOX_TEMPORAL_ADDRESS="+link.addr(),
		"ASTRABOX_METRICS_LISTEN="+probes[len("http://"):],
		"ASTRABOX_SANDBOX_LOCAL_STATE_DIR="+t.TempDir(),
	)
	p := startProcess(t, bin, env, "worker")
	waitHTTP(t, p, probes+"/readyz", http.StatusOK)

	live := getProbe(t, probes+"/healthz")
	require.Equal(t, http.StatusOK, live.status)
	require.Equal(t, "OK", live.Code)
	require.Equal(t, "up", live.Data.Status)
	ready := getProbe(t, probes+"/readyz")
	require.Equal(t, "ready", ready.Data.Status)
	require.Equal(t, map[string]string{"database": "ok", "temporal": "ok"}, ready.Data.Checks)

	link.setDown(true)
	waitHTTP(t, p, probes+"/readyz", http.StatusServiceUnavailable)
	notReady := getProbe(t, probes+"/readyz")
	require.Equal(t, "SERVICE_UNAVAILABLE", notReady.Code)
	require.Equal(t, map[string]string{"database": "ok", "temporal": "failed"}, notReady.Data.Checks)
	require.NotEmpty(t, notReady.retryAfter)
	require.Equal(t, http.StatusOK, getProbe(t, probes+"/healthz").status, "a lost dependency is not a dead worker")

	link.setDown(false)
	waitHTTP(t, p, probes+"/readyz", http.StatusOK)

	p.interrupt(t)
	require.NoError(t, portFree(mustPort(t, probes)), "the listener closes with the worker")
}

func mustPort(t *testing.T, url string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(url[len("http://"):])
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}
