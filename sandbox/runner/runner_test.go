package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// startRunner serves a runner from stateDir and returns a client for it.
func startRunner(t testing.TB, stateDir string) (*Runner, *runnerapi.Client) {
	t.Helper()
	return startRunnerWith(t, runnerapi.Config{StateDir: stateDir, Workspace: stateDir})
}

// startRunnerWith serves a runner with cfg (PATH set) and returns a client for it.
func startRunnerWith(t testing.TB, cfg runnerapi.Config) (*Runner, *runnerapi.Client) {
	t.Helper()
	cfg.Env = map[string]string{"PATH": "/usr/bin:/bin"}
	r, err := New(cfg, log.New(io.Discard, "", 0))
	require.NoError(t, err)
	r.retry = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("runner did not start: %v", err)
	}
	c := runnerapi.NewClient(r.cfg.Socket)
	t.Cleanup(func() {
		c.Close()
		r.shutdown(time.Second)
		cancel()
		<-done
	})
	return r, c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func readAll(t *testing.T, s *runnerapi.OutputStream) []sandbox.OutputLine {
	t.Helper()
	var out []sandbox.OutputLine
	for {
		l, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, l)
	}
}

func TestReplayFromOffsetAndFollow(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, c := startRunner(t, t.TempDir())
	_, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "echo", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)

	follow, err := c.Output(ctx, "echo", 0, true)
	require.NoError(t, err)
	defer follow.Close()
	for i := 1; i <= 5; i++ {
		res, err := c.WriteStdin(ctx, "echo", fmt.Sprintf("w%d", i), []byte(fmt.Sprintf("line %d\n", i)))
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		l, err := follow.Next()
		require.NoError(t, err)
		require.Equal(t, int64(i), l.Offset)
		require.Equal(t, fmt.Sprintf("line %d", i), string(l.Data))
	}
	// A retried write id is acknowledged and not written again.
	res, err := c.WriteStdin(ctx, "echo", "w3", []byte("line 3\n"))
	require.NoError(t, err)
	require.True(t, res.Duplicate)

	replay, err := c.Output(ctx, "echo", 2, false)
	require.NoError(t, err)
	lines := readAll(t, replay)
	require.Equal(t, runnerapi.EndCaughtUp, replay.EndReason())
	require.Len(t, lines, 3)
	require.Equal(t, int64(3), lines[0].Offset)
	require.Equal(t, "line 5", string(lines[2].Data))

	// A long-running program whose stdin is closed refuses further writes.
	_, err = c.StartProcess(ctx, sandbox.ProcessSpec{ID: "deaf", Argv: []string{"/bin/sleep", "600"}})
	require.NoError(t, err)
	require.NoError(t, c.CloseStdin(ctx, "deaf"))
	_, err = c.WriteStdin(ctx, "deaf", "w1", []byte("x\n"))
	require.ErrorIs(t, err, sandbox.ErrStdinClosed)

	require.NoError(t, c.CloseStdin(ctx, "echo"))
	st, err := c.Wait(ctx, "echo")
	require.NoError(t, err)
	require.NotNil(t, st.Exit)
	require.Equal(t, 0, st.Exit.Code)
	_, err = follow.Next()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, runnerapi.EndExited, follow.EndReason())
}

func TestWriteToExitedProcessFails(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, c := startRunner(t, t.TempDir())
	_, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "short", Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}})
	require.NoError(t, err)
	st, err := c.Wait(ctx, "short")
	require.NoError(t, err)
	require.Equal(t, 7, st.Exit.Code)
	_, err = c.WriteStdin(ctx, "short", "late", []byte("hello\n"))
	require.ErrorIs(t, err, sandbox.ErrProcessExited)

	s, err := c.Output(ctx, "short", 0, true)
	require.NoError(t, err)
	lines := readAll(t, s)
	require.Len(t, lines, 2)
	streams := map[sandbox.Stream]string{lines[0].Stream: string(lines[0].Data), lines[1].Stream: string(lines[1].Data)}
	require.Equal(t, map[sandbox.Stream]string{sandbox.Stdout: "out", sandbox.Stderr: "err"}, streams)

	_, err = c.Process(ctx, "missing")
	require.ErrorIs(t, err, sandbox.ErrNoProcess)
}

func TestSignalAndRetriedStart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, c := startRunner(t, t.TempDir())
	spec := sandbox.ProcessSpec{ID: "sleeper", Argv: []string{"/bin/sleep", "600"}}
	first, err := c.StartProcess(ctx, spec)
	require.NoError(t, err)
	again, err := c.StartProcess(ctx, spec)
	require.NoError(t, err)
	require.True(t, again.Existed)
	require.Equal(t, first.PID, again.PID)
	require.NoError(t, c.Signal(ctx, "sleeper", "SIGTERM", false))
	st, err := c.Wait(ctx, "sleeper")
	require.NoError(t, err)
	require.Equal(t, "SIGTERM", st.Exit.Signal)
	require.Equal(t, 128+15, st.Exit.Code)
}

func TestExecAndFiles(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	_, c := startRunner(t, dir)
	res, err := c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "cat; echo e >&2; exit 3"}, Stdin: []byte("in")})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "in", string(res.Stdout))
	require.Equal(t, "e\n", string(res.Stderr))

	path := filepath.Join(dir, "sub", "f.txt")
	require.NoError(t, c.WriteFile(ctx, path, []byte("data"), 0o640))
	got, err := c.ReadFile(ctx, path)
	require.NoError(t, err)
	require.Equal(t, "data", string(got))
	for _, tc := range []struct {
		offset int64
		want   string
	}{{0, "data"}, {2, "ta"}, {4, ""}, {9, ""}} {
		got, size, err := c.ReadFileFrom(ctx, path, tc.offset)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got), "from %d", tc.offset)
		require.Equal(t, int64(4), size, "the size beside the bytes, also below the offset")
	}
	_, _, err = c.ReadFileFrom(ctx, path, -1)
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
	entries, err := c.ListDir(ctx, filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, uint32(0o640), entries[0].Mode)
	_, err = c.ReadFile(ctx, filepath.Join(dir, "nope"))
	require.Error(t, err)
}

// TestFullDiskHoldsOutputBack fills a small tmpfs under the journal: the failure
// shows in the process status, the program is held back instead of losing lines,
// and once space returns every line is journaled in order.
func TestFullDiskHoldsOutputBack(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		if testing.Short() {
			t.Skip("needs root to mount a tmpfs")
		}
		t.Fatal("this test mounts a small tmpfs and must run as root (CI runs tests as root)")
	}
	ctx := testContext(t)
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=128k"))
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	_, c := startRunner(t, dir)
	const total = 40000
	_, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "noisy",
		Argv: []string{"/bin/sh", "-c", fmt.Sprintf("seq 1 %d", total)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := c.Process(ctx, "noisy")
		return err == nil && st.JournalError != ""
	}, 20*time.Second, 10*time.Millisecond)
	st, err := c.Process(ctx, "noisy")
	require.NoError(t, err)
	require.Contains(t, st.JournalError, "no space left on device")

	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=8m"))
	st, err = c.Wait(ctx, "noisy")
	require.NoError(t, err)
	require.Equal(t, 0, st.Exit.Code)
	s, err := c.Output(ctx, "noisy", 0, true)
	require.NoError(t, err)
	lines := readAll(t, s)
	require.Len(t, lines, total)
	for i, l := range lines {
		require.Equal(t, fmt.Sprint(i+1), string(l.Data))
	}
	st, err = c.Process(ctx, "noisy")
	require.NoError(t, err)
	require.Empty(t, st.JournalError)
}

// TestTCPListenerNeedsToken serves the API on TCP for remote backends; a
// request without the token is refused.
func TestTCPListenerNeedsToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	port, err := freeport.Reserve()
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	r, err := New(runnerapi.Config{StateDir: dir, Workspace: dir, ListenTCP: addr, Token: "t0ken"}, log.New(io.Discard, "", 0))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- r.Serve(rctx, func() { close(ready) }) }()
	<-ready
	defer func() { cancel(); <-done }()
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	info, err := runnerapi.NewDialClient(dial, "t0ken").Info(ctx)
	require.NoError(t, err)
	require.Equal(t, r.Info().BootID, info.BootID)
	_, err = runnerapi.NewDialClient(dial, "wrong").Info(ctx)
	require.ErrorContains(t, err, "UNAUTHORIZED")
}

// TestCommitReleasesOutput frees committed journal bytes: replay from before
// the commit is refused, later offsets are unchanged.
func TestCommitReleasesOutput(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	_, c := startRunner(t, dir)
	const total = 20000
	_, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "big", Argv: []string{"/bin/sh", "-c",
		fmt.Sprintf(`seq -f "%%0200g" 1 %d`, total)}})
	require.NoError(t, err)
	_, err = c.Wait(ctx, "big")
	require.NoError(t, err)
	journals, err := filepath.Glob(filepath.Join(dir, "boots", "*", "proc", "big", "journal"))
	require.NoError(t, err)
	require.Len(t, journals, 1)
	used := func() int64 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(journals[0], &st))
		return st.Blocks * 512
	}
	before := used()
	require.Greater(t, before, int64(4<<20))

	require.NoError(t, c.CommitOutput(ctx, "big", total-10))
	require.Less(t, used(), int64(1<<20), "committed bytes are given back")
	_, err = c.Output(ctx, "big", 5, false)
	require.ErrorIs(t, err, sandbox.ErrOutputReleased)
	s, err := c.Output(ctx, "big", total-10, false)
	require.NoError(t, err)
	lines := readAll(t, s)
	require.Len(t, lines, 10)
	require.Equal(t, int64(total-9), lines[0].Offset)
	require.Equal(t, fmt.Sprintf("%0200d", total-9), string(lines[0].Data))
	st, err := c.Process(ctx, "big")
	require.NoError(t, err)
	require.Equal(t, int64(total-10), st.CommittedOffset)
}

// TestSignalAfterTheReapNamesNoStranger: a program that exited is reaped at once, but
// its exit is reported only once its output drained, which a background child holding
// the pipes delays. A signal in between must not go by number to whatever process now
// holds it: it is refused as sent to an exited program.
func TestSignalAfterTheReapNamesNoStranger(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, c := startRunner(t, t.TempDir())
	_, err := c.StartProcess(ctx, sandbox.ProcessSpec{ID: "parent", Argv: []string{"/bin/sh", "-c", "sleep 30 & echo $$"}})
	require.NoError(t, err)
	follow, err := c.Output(ctx, "parent", 0, true)
	require.NoError(t, err)
	defer follow.Close()
	line, err := follow.Next()
	require.NoError(t, err)
	pid := strings.TrimSpace(string(line.Data))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the program was never reaped")
		case <-tick.C:
		}
	}
	st, err := c.Process(ctx, "parent")
	require.NoError(t, err)
	require.Nil(t, st.Exit, "the exit waits for the output to drain")

	require.ErrorIs(t, c.Signal(ctx, "parent", "SIGTERM", false), sandbox.ErrProcessExited)
	// The group outlives its reaped leader: the background child is still reached.
	require.NoError(t, c.Signal(ctx, "parent", "SIGKILL", true))
	st, err = c.Wait(ctx, "parent")
	require.NoError(t, err)
	require.Equal(t, 0, st.Exit.Code)
}
