package temporaldev

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/astrabox/astrabox/internal/freeport"
)

// fakeTemporal writes a stand-in for the Temporal CLI that records each start's
// pid in pids and then runs until killed, or exits at once with exitAtOnce.
//
// The tests that run it are not parallel: a fork by a parallel test holds, until its
// exec, every descriptor open at that moment, so the stand-in being written could not be
// executed (ETXTBSY) and a port just probed free would still be bound.
func fakeTemporal(t *testing.T, exitAtOnce bool) (binary, pids string) {
	t.Helper()
	dir := t.TempDir()
	pids = filepath.Join(dir, "pids")
	body := "echo $$ >> " + pids + "\nexec tail -f /dev/null\n"
	if exitAtOnce {
		body = "echo $$ >> " + pids + "\nexit 3\n"
	}
	binary = filepath.Join(dir, "temporal")
	require.NoError(t, os.WriteFile(binary, []byte("#!/bin/sh\n"+body), 0o755))
	return binary, pids
}

func fakeOptions(t *testing.T, binary string) Options {
	t.Helper()
	dir := t.TempDir()
	return Options{Binary: binary, Port: freePort(t), UIPort: freePort(t),
		DBFile: filepath.Join(dir, "temporal", "temporal.db"), LogFile: filepath.Join(dir, "temporal.log"),
		Restart: RestartPolicy{FirstDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxQuick: 3}}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Reserve()
	require.NoError(t, err)
	return port
}

// startedPIDs polls the fake's pid file until it names n starts.
func startedPIDs(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		raw, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(raw)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		if len(pids) >= n {
			return pids
		}
		require.True(t, time.Now().Before(deadline), "waited for %d starts, saw %v", n, pids)
		<-tick.C
	}
}

// TestTemporalRestartedAfterKill kills the server's process group as an outage
// does: the supervisor starts it again, and stop then ends the new one without
// blocking on the exit it already observed.
func TestTemporalRestartedAfterKill(t *testing.T) {
	binary, pids := fakeTemporal(t, false)
	s, err := Start(fakeOptions(t, binary), zaptest.NewLogger(t))
	require.NoError(t, err)
	first := startedPIDs(t, pids, 1)[0]
	require.NoError(t, syscall.Kill(-first, syscall.SIGKILL))
	second := startedPIDs(t, pids, 2)[1]
	assert.NotEqual(t, first, second)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
	require.NoError(t, s.Stop(ctx), "a second stop returns at once")
	assert.ErrorIs(t, syscall.Kill(second, 0), syscall.ESRCH, "the restarted server is stopped")
	assert.NoError(t, s.Failure())
}

// TestTemporalGivenUpAfterQuickExits stops restarting a server that exits right
// after every start, reports why, and still stops cleanly.
func TestTemporalGivenUpAfterQuickExits(t *testing.T) {
	binary, pids := fakeTemporal(t, true)
	s, err := Start(fakeOptions(t, binary), zaptest.NewLogger(t))
	require.NoError(t, err)
	select {
	case <-s.GaveUp():
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor did not give up")
	}
	require.Error(t, s.Failure())
	assert.Contains(t, s.Failure().Error(), "exited 4 times in a row")
	assert.Len(t, startedPIDs(t, pids, 4), 4, "the first start and three restarts")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
}

// scriptedStore is a stand-in for the frontend's probe: its n-th probe (from
// 1) finds the store interrupted when interrupted(n) says so. Each probe is
// counted on calls, whose buffer holds more than any test waits for.
type scriptedStore struct {
	interrupted func(n int32) bool
	n           atomic.Int32
	calls       chan struct{}
}

func newScriptedStore(interrupted func(n int32) bool) *scriptedStore {
	return &scriptedStore{interrupted: interrupted, calls: make(chan struct{}, 1024)}
}

func (s *scriptedStore) probe(context.Context) error {
	defer func() { s.calls <- struct{}{} }()
	if s.interrupted(s.n.Add(1)) {
		return status.Error(codes.Unavailable, "GetNamespace operation failed. Error: interrupted (9)")
	}
	return nil
}

func watchedOptions(t *testing.T, binary string, store *scriptedStore) Options {
	opts := fakeOptions(t, binary)
	opts.Health = HealthPolicy{Every: time.Millisecond, Failures: 3, probe: store.probe}
	return opts
}

// A store that answers the policy's number of probes in a row as interrupted
// is restarted on the same database, once: the new run answers.
func TestTemporalRestartedWhenItsStoreStaysInterrupted(t *testing.T) {
	binary, pids := fakeTemporal(t, false)
	store := newScriptedStore(func(n int32) bool { return n <= 3 })
	s, err := Start(watchedOptions(t, binary, store), zaptest.NewLogger(t))
	require.NoError(t, err)
	started := startedPIDs(t, pids, 2)
	for range 23 { // the three interrupted probes and twenty healthy ones after them
		<-store.calls
	}
	assert.Len(t, startedPIDs(t, pids, 2), 2, "one restart, not one a probe")
	assert.ErrorIs(t, syscall.Kill(started[0], 0), syscall.ESRCH, "the interrupted run was killed")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
	assert.NoError(t, s.Failure())
}

// Interrupted probes fewer than the policy's in a row (another request's
// interruption can reach a probe's statement) restart nothing.
func TestTemporalKeptThroughAnOccasionalInterruptedProbe(t *testing.T) {
	binary, pids := fakeTemporal(t, false)
	store := newScriptedStore(func(n int32) bool { return n%3 != 0 }) // two interrupted, one healthy, again
	s, err := Start(watchedOptions(t, binary, store), zaptest.NewLogger(t))
	require.NoError(t, err)
	startedPIDs(t, pids, 1)
	for range 30 {
		<-store.calls
	}
	assert.Len(t, startedPIDs(t, pids, 1), 1, "no restart")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
}
