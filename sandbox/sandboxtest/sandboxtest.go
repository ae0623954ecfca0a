// Package sandboxtest is the conformance suite every sandbox backend passes: the
// behaviour the platform relies on, checked through the sandbox.Backend and
// sandbox.Handle interfaces only. A backend's tests call Run with a factory
// that gives each subtest a fresh backend and a spec its boxes can run
// (an image for backends that pull images); every box a subtest makes is
// destroyed when it ends.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox"
)

// Factory gives a subtest a backend of its own and the spec its boxes start
// from. The factory registers the backend's own cleanup (Close); the suite
// destroys the boxes it made.
type Factory func(t *testing.T) (sandbox.Backend, sandbox.Spec)

// capability names a declared capability a case needs; a backend that does
// not declare it skips the case, whatever backend it is.
type capability struct {
	name string
	has  func(sandbox.Capabilities) bool
}

var (
	always          = capability{}
	processSessions = capability{"process_sessions", func(c sandbox.Capabilities) bool { return c.ProcessSessions }}
	pause           = capability{"pause", func(c sandbox.Capabilities) bool { return c.Pause }}
)

// Run runs the suite. The machine's commands (/bin/sh, cat, perl) must be in
// the boxes the spec makes. Cases that need a capability run only on backends
// that declare it in Capabilities; the prewarm case checks either side of the
// declaration.
func Run(t *testing.T, newBackend Factory) {
	tests := []struct {
		name  string
		needs capability
		fn    func(t *testing.T, s *suite)
	}{
		{"ProcessSession", processSessions, testProcessSession},
		{"ExitStatusAndStreams", processSessions, testExitStatusAndStreams},
		{"Exec", always, testExec},
		{"Files", always, testFiles},
		{"WorkspaceFiles", always, testWorkspaceFiles},
		{"Terminal", always, testTerminal},
		{"Ports", processSessions, testPorts},
		{"PauseResume", pause, testPauseResume},
		{"DeathIsReported", processSessions, testDeathIsReported},
		{"GetListReap", always, testGetListReap},
		{"Prewarm", always, testPrewarm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, spec := newBackend(t)
			if tc.needs.has != nil && !tc.needs.has(b.Capabilities()) {
				t.Skipf("the backend does not declare %s", tc.needs.name)
			}
			tc.fn(t, &suite{b: b, spec: spec})
		})
	}
}

type suite struct {
	b    sandbox.Backend
	spec sandbox.Spec
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// create makes a box that is destroyed when the test ends.
func (s *suite) create(t *testing.T) sandbox.Handle {
	t.Helper()
	ctx := testContext(t)
	h, err := s.b.Create(ctx, s.spec)
	require.NoError(t, err)
	t.Cleanup(func() {
		h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, s.b.Destroy(ctx, h.ID()))
	})
	return h
}

func readLines(t *testing.T, st sandbox.OutputStream, n int) []sandbox.OutputLine {
	t.Helper()
	var out []sandbox.OutputLine
	for len(out) < n {
		l, err := st.Next()
		require.NoError(t, err, "after %d of %d lines", len(out), n)
		out = append(out, l)
	}
	return out
}

func sh(t *testing.T, h sandbox.Handle, script string) sandbox.ExecResult {
	t.Helper()
	res, err := h.Exec(testContext(t), sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}})
	require.NoError(t, err)
	return res
}

// testProcessSession: stdin is written once per write id, output is journalled
// with offsets and replayed from any offset, a repeated start is recognised.
func testProcessSession(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	st, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "cat", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	require.True(t, st.Running)
	again, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "cat", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	require.True(t, again.Existed)
	require.Equal(t, st.PID, again.PID)

	res, err := h.WriteStdin(ctx, "cat", "w1", []byte("one\n"))
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	res, err = h.WriteStdin(ctx, "cat", "w1", []byte("one\n"))
	require.NoError(t, err)
	require.True(t, res.Duplicate, "a repeated write id is not written again")
	_, err = h.WriteStdin(ctx, "cat", "w2", []byte("two\n"))
	require.NoError(t, err)

	out, err := h.ReadOutput(ctx, "cat", 0, true)
	require.NoError(t, err)
	lines := readLines(t, out, 2)
	out.Close()
	require.Equal(t, int64(1), lines[0].Offset)
	require.Equal(t, "one", string(lines[0].Data))
	require.Equal(t, "two", string(lines[1].Data))
	require.Equal(t, sandbox.Stdout, lines[1].Stream)

	replay, err := h.ReadOutput(ctx, "cat", 1, false)
	require.NoError(t, err)
	l := readLines(t, replay, 1)[0]
	require.Equal(t, int64(2), l.Offset)
	_, err = replay.Next()
	require.ErrorIs(t, err, io.EOF, "without follow the stream ends when caught up")
	replay.Close()

	require.NoError(t, h.CloseStdin(ctx, "cat"))
	require.NoError(t, h.CloseStdin(ctx, "cat"), "closing twice is not an error")
	done, err := h.Wait(ctx, "cat")
	require.NoError(t, err)
	require.NotNil(t, done.Exit)
	require.Equal(t, 0, done.Exit.Code)
	_, err = h.WriteStdin(ctx, "cat", "w3", []byte("late\n"))
	require.True(t, errors.Is(err, sandbox.ErrStdinClosed) || errors.Is(err, sandbox.ErrProcessExited), "got %v", err)
	_, err = h.Process(ctx, "nobody")
	require.ErrorIs(t, err, sandbox.ErrNoProcess)
}

// testExitStatusAndStreams: both streams are journalled in order, exit codes and
// signals are reported, a signal reaches the process.
func testExitStatusAndStreams(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	_, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "p", Env: map[string]string{"GREETING": "hi"},
		Argv: []string{"/bin/sh", "-c", `echo "$GREETING out"; echo err >&2; exit 3`}})
	require.NoError(t, err)
	st, err := h.Wait(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, 3, st.Exit.Code)
	out, err := h.ReadOutput(ctx, "p", 0, true)
	require.NoError(t, err)
	defer out.Close()
	got := map[sandbox.Stream]string{}
	for {
		l, err := out.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got[l.Stream] += string(l.Data)
	}
	require.Equal(t, "hi out", got[sandbox.Stdout])
	require.Equal(t, "err", got[sandbox.Stderr])

	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "sleeper", Argv: []string{"/bin/sleep", "600"}})
	require.NoError(t, err)
	require.NoError(t, h.Signal(ctx, "sleeper", "SIGTERM", true))
	st, err = h.Wait(ctx, "sleeper")
	require.NoError(t, err)
	require.Equal(t, "SIGTERM", st.Exit.Signal)
}

// testExec: a short command runs to completion with its environment, stdin and
// working directory, and a timeout kills it.
func testExec(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", `read x; echo "$x $FOO"; echo e >&2; exit 4`},
		Env: map[string]string{"FOO": "bar"}, Stdin: []byte("in\n")})
	require.NoError(t, err)
	require.Equal(t, 4, res.ExitCode)
	require.Equal(t, "in bar\n", string(res.Stdout))
	require.Equal(t, "e\n", string(res.Stderr))
	res, err = h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sleep", "60"}, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
}

// workspace is the box's workspace folder as the box sees it: the default
// working directory of its commands.
func workspace(t *testing.T, h sandbox.Handle) string {
	return strings.TrimSpace(string(sh(t, h, "pwd").Stdout))
}

// testFiles: files written through the handle are the box's files.
func testFiles(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	ws := workspace(t, h)
	path := ws + "/conf/settings.json"
	require.NoError(t, h.WriteFile(ctx, path, []byte(`{"a":1}`), 0o600))
	data, err := h.ReadFile(ctx, path)
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(data))
	tail, size, err := h.ReadFileFrom(ctx, path, 5)
	require.NoError(t, err)
	require.Equal(t, `1}`, string(tail), "read from a byte offset")
	require.Equal(t, int64(7), size)
	require.Equal(t, `{"a":1}`, string(sh(t, h, "cat conf/settings.json").Stdout), "the box sees the file")
	require.Equal(t, "600\n", string(sh(t, h, "stat -c %a conf/settings.json").Stdout))
	entries, err := h.ListDir(ctx, ws+"/conf")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, int64(7), entries[0].Size)
	_, err = h.ReadFile(ctx, ws+"/missing")
	require.Error(t, err)
}

// UploadFiles is an upload of files, in order.
func UploadFiles(files ...sandbox.UploadFile) sandbox.UploadSource { return &uploads{files: files} }

type uploads struct{ files []sandbox.UploadFile }

func (u *uploads) Next() (sandbox.UploadFile, error) {
	if len(u.files) == 0 {
		return sandbox.UploadFile{}, io.EOF
	}
	f := u.files[0]
	u.files = u.files[1:]
	return f, nil
}

// testWorkspaceFiles: the workspace files API lists, uploads and downloads
// beneath the workspace and refuses paths that leave it.
func testWorkspaceFiles(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	saved, err := h.UploadWorkspace(ctx, UploadFiles(
		sandbox.UploadFile{Path: "docs/a.txt", Body: strings.NewReader("alpha")}, sandbox.UploadFile{Path: "b.txt", Mode: 0o600, Body: strings.NewReader("beta")}))
	require.NoError(t, err)
	require.Len(t, saved, 2)
	list, err := h.ListWorkspace(ctx, "docs")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "docs/a.txt", list[0].Path)
	body, info, err := h.OpenWorkspaceFile(ctx, "docs/a.txt")
	require.NoError(t, err)
	data, err := io.ReadAll(body)
	body.Close()
	require.NoError(t, err)
	require.Equal(t, "alpha", string(data))
	require.Equal(t, int64(5), info.Size)
	_, _, err = h.OpenWorkspaceFile(ctx, "docs")
	require.ErrorIs(t, err, sandbox.ErrIsFolder)
	_, err = h.ListWorkspace(ctx, "../etc")
	require.ErrorIs(t, err, sandbox.ErrInvalidPath)
	_, _, err = h.OpenWorkspaceFile(ctx, "nothing-here")
	require.ErrorIs(t, err, sandbox.ErrNoFile)
	arc, err := h.ArchiveWorkspace(ctx, "", sandbox.ArchiveTar)
	require.NoError(t, err)
	raw, err := io.ReadAll(arc)
	arc.Close()
	require.NoError(t, err)
	require.True(t, bytes.Contains(raw, []byte("alpha")))
}

// testTerminal: a shell on a pseudo-terminal answers keystrokes, and a reader
// from offset 0 replays its output.
func testTerminal(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	st, err := h.StartTerminal(ctx, sandbox.TerminalSpec{ID: "t1", Argv: []string{"/bin/sh"}, Cols: 80, Rows: 24})
	require.NoError(t, err)
	require.True(t, st.Running)
	require.NoError(t, h.WriteTerminal(ctx, "t1", []byte("echo $((6*7))x\n")))
	read := func(after int64) string {
		out, err := h.ReadTerminal(ctx, "t1", after)
		require.NoError(t, err)
		defer out.Close()
		var seen string
		for !strings.Contains(seen, "42x") {
			l, err := out.Next()
			require.NoError(t, err, "terminal output so far: %q", seen)
			seen += string(l.Data)
		}
		return seen
	}
	read(0)
	require.Contains(t, read(0), "42x", "output is replayed from offset 0")
	require.NoError(t, h.ResizeTerminal(ctx, "t1", 100, 30))
}

func freePort(t *testing.T) int {
	port, err := freeport.Reserve()
	require.NoError(t, err)
	return port
}

// testPorts: the worker reaches a port the box listens on, and only that.
func testPorts(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	port := freePort(t)
	_, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "web", Argv: []string{"/usr/bin/perl", "-MIO::Socket::INET", "-e",
		fmt.Sprintf(`$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => %d, Listen => 5, ReuseAddr => 1) or die "$!";
		 while ($c = $s->accept) { print $c "hello from the box\n"; close $c }`, port)}})
	require.NoError(t, err)
	require.NoError(t, h.WaitPort(ctx, port))
	conn, err := h.DialPort(ctx, port)
	require.NoError(t, err)
	greeting, err := io.ReadAll(conn)
	conn.Close()
	require.NoError(t, err)
	require.Equal(t, "hello from the box\n", string(greeting))
	_, err = h.DialPort(ctx, freePort(t))
	require.Error(t, err, "nothing listens there")
}

// testPauseResume: a paused box reports Paused, and after Resume its
// processes go on where they were.
func testPauseResume(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	_, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "cat", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	require.NoError(t, s.b.Pause(ctx, h.ID()))
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StatePaused, info.State)
	require.NoError(t, s.b.Resume(ctx, h.ID()))
	info, err = h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, info.State)
	_, err = h.WriteStdin(ctx, "cat", "w1", []byte("after resume\n"))
	require.NoError(t, err)
	out, err := h.ReadOutput(ctx, "cat", 0, true)
	require.NoError(t, err)
	defer out.Close()
	require.Equal(t, "after resume", string(readLines(t, out, 1)[0].Data))
}

// testDeathIsReported: a process that ends its box makes Watch report the
// death once, and the handle's calls then fail with ErrBoxLost; a destroyed
// box is reported too.
func testDeathIsReported(t *testing.T, s *suite) {
	h := s.create(t)
	ctx := testContext(t)
	deaths, err := s.b.Watch(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", EndsBox: true, Argv: []string{"/bin/sh", "-c", "read x; exit 3"}})
	require.NoError(t, err)
	_, err = h.WriteStdin(ctx, "agent", "w1", []byte("go\n"))
	require.NoError(t, err)
	select {
	case d, ok := <-deaths:
		require.True(t, ok, "the channel delivers the death before closing")
		require.Equal(t, h.ID(), d.BoxID)
		require.NotEmpty(t, d.Reason)
	case <-ctx.Done():
		t.Fatal("no death reported")
	}
	_, ok := <-deaths
	require.False(t, ok, "the channel is closed after the death")
	_, err = h.WriteStdin(ctx, "agent", "w2", []byte("late\n"))
	require.ErrorIs(t, err, sandbox.ErrBoxLost)

	other := s.create(t)
	deaths, err = s.b.Watch(ctx, other.ID())
	require.NoError(t, err)
	require.NoError(t, s.b.Destroy(ctx, other.ID()))
	select {
	case d := <-deaths:
		require.Equal(t, other.ID(), d.BoxID)
	case <-ctx.Done():
		t.Fatal("no death reported for a destroyed box")
	}
	require.NoError(t, s.b.Destroy(ctx, other.ID()), "destroying again is not an error")
}

// testGetListReap: a box is found again by id and listed; Reap destroys the
// boxes the caller does not keep; an unknown id is ErrNotFound.
func testGetListReap(t *testing.T, s *suite) {
	kept := s.create(t)
	gone := s.create(t)
	ctx := testContext(t)
	again, err := s.b.Get(ctx, kept.ID())
	require.NoError(t, err)
	require.Equal(t, "found\n", string(sh(t, again, "echo found").Stdout))
	again.Close()
	listed, err := s.b.List(ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, in := range listed {
		ids[in.ID] = true
	}
	require.True(t, ids[kept.ID()] && ids[gone.ID()], "both boxes are listed: %v", ids)

	reaped, err := s.b.Reap(ctx, func(id string) bool { return id == kept.ID() })
	require.NoError(t, err)
	require.Equal(t, []string{gone.ID()}, reaped)
	_, err = s.b.Get(ctx, gone.ID())
	require.ErrorIs(t, err, sandbox.ErrNotFound)
	require.Equal(t, 0, sh(t, kept, "true").ExitCode)
	_, err = s.b.Get(ctx, "no-such-box")
	require.ErrorIs(t, err, sandbox.ErrNotFound)
}

// testPrewarm: a backend that declares prewarm is a sandbox.Prewarmer whose
// pool hands out a ready box through Claim, and Reap keeps the boxes waiting in
// the pool; a backend that does not declare it answers Claim with ErrNoWarmBox.
func testPrewarm(t *testing.T, s *suite) {
	ctx := testContext(t)
	const key = "conformance-prewarm"
	if !s.b.Capabilities().Prewarm {
		_, err := s.b.Claim(ctx, key)
		require.ErrorIs(t, err, sandbox.ErrNoWarmBox)
		return
	}
	pw, ok := s.b.(sandbox.Prewarmer)
	require.True(t, ok, "a backend that declares prewarm implements sandbox.Prewarmer")
	_, err := s.b.Claim(ctx, key)
	require.ErrorIs(t, err, sandbox.ErrNoWarmBox, "no pool yet")
	started, err := pw.EnsurePrewarm(key, s.spec, 1)
	require.NoError(t, err)
	require.True(t, started)
	started, err = pw.EnsurePrewarm(key, s.spec, 1)
	require.NoError(t, err)
	require.False(t, started, "a pool the backend keeps is left as it is")

	var h sandbox.Handle
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for h == nil {
		h, err = s.b.Claim(ctx, key)
		if errors.Is(err, sandbox.ErrNoWarmBox) {
			select {
			case <-ctx.Done():
				t.Fatalf("no warm box was ready: %v", ctx.Err())
			case <-tick.C:
			}
			continue
		}
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, s.b.Destroy(ctx, h.ID()))
	})
	require.Equal(t, "warm\n", string(sh(t, h, "echo warm").Stdout))

	reaped, err := s.b.Reap(ctx, func(string) bool { return false })
	require.NoError(t, err)
	require.Equal(t, []string{h.ID()}, reaped, "the claimed box is reaped, the pool's are kept")
}
