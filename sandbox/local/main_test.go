package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil/boxroot"
	"github.com/astrabox/astrabox/sandbox"
)

// runnerBin is the astrabox-runner binary built for this test run.
var runnerBin string

// uidBase gives every test package run its own uid range slice; each test
// takes its own block so parallel tests never share accounts.
var uidBlocks = make(chan int, 64)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := boxroot.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runnerBin = filepath.Join(dir, "astrabox-runner")
	build := exec.Command("go", "build", "-trimpath", "-o", runnerBin, "github.com/astrabox/astrabox/cmd/astrabox-runner")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build astrabox-runner: %v\n%s", err, out)
		return 1
	}
	for i := 0; i < cap(uidBlocks); i++ {
		uidBlocks <- 300000 + i*100
	}
	code := m.Run()
	// Every box a test started must have ended and its folder be gone.
	if err := boxroot.Finish(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// requireBoxes fails (or skips under -short) when this machine cannot run
// boxes: these tests need root and bubblewrap, as CI provides.
func requireBoxes(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("bwrap")
	if os.Getuid() == 0 && err == nil {
		return
	}
	if testing.Short() {
		t.Skip("needs root and bubblewrap")
	}
	t.Fatalf("box tests need root and bubblewrap (apt-get install bubblewrap, run as root): uid=%d, bwrap: %v", os.Getuid(), err)
}

// testOptions returns options with a fresh short state dir (unix socket paths
// are limited to 108 bytes) and a uid block of the test's own.
func testOptions(t *testing.T) Options {
	t.Helper()
	requireBoxes(t)
	dir, err := boxroot.StateDir()
	require.NoError(t, err)
	first := <-uidBlocks
	t.Cleanup(func() {
		_ = os.RemoveAll(dir)
		uidBlocks <- first
	})
	return Options{StateDir: dir, RunnerPath: runnerBin, UIDFirst: first, UIDCount: 100, ReadyTimeout: 20 * time.Second}
}

// newBackend starts a backend and cleans up every box it made.
func newBackend(t *testing.T, opts Options) *Backend {
	t.Helper()
	b, err := New(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := b.Reap(ctx, func(string) bool { return false })
		require.NoError(t, err)
		require.NoError(t, b.Close())
		_ = os.RemoveAll(opts.StateDir)
	})
	return b
}

// testContext bounds one test's calls to its boxes. The bound is for a test that
// hangs, not a timing goal: with every package's tests sharing two cores, a test of a
// dozen steps in a box (the terminal's) once took over a minute.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sh runs a shell command in the box and returns its result.
func sh(t *testing.T, h sandbox.Handle, script string) sandbox.ExecResult {
	t.Helper()
	res, err := h.Exec(testContext(t), sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}})
	require.NoError(t, err)
	return res
}

// readLines reads n lines from a stream.
func readLines(t *testing.T, s sandbox.OutputStream, n int) []sandbox.OutputLine {
	t.Helper()
	out := make([]sandbox.OutputLine, 0, n)
	for len(out) < n {
		l, err := s.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("stream ended after %d of %d lines", len(out), n)
		}
		require.NoError(t, err)
		out = append(out, l)
	}
	return out
}

func mustRecord(t *testing.T, b *Backend, id string) record {
	t.Helper()
	x, err := b.lookup(id)
	require.NoError(t, err)
	return x.record()
}
