package local

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func upload(ctx context.Context, h sandbox.Handle, list ...sandbox.UploadFile) ([]sandbox.FileInfo, error) {
	return h.UploadWorkspace(ctx, sandboxtest.UploadFiles(list...))
}

func file(path, content string) sandbox.UploadFile {
	return sandbox.UploadFile{Path: path, Body: strings.NewReader(content)}
}

// failingReader gives some bytes, then fails, as a cut connection does.
type failingReader struct{ sent bool }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.sent {
		return 0, errors.New("connection cut")
	}
	f.sent = true
	return copy(p, "partial"), nil
}

func TestWorkspaceFilesOnABox(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	info, err := h.Info(ctx)
	require.NoError(t, err)

	// Upload two files, one into folders that do not exist yet.
	up, err := upload(ctx, h, file("notes.txt", "hello\n"), sandbox.UploadFile{Path: "src/app/main.sh", Mode: 0o755, Body: strings.NewReader("echo hi\n")})
	require.NoError(t, err)
	require.Len(t, up, 2)
	owner := sh(t, h, "stat -c '%u %a' /workspace/notes.txt /workspace/src/app/main.sh /workspace/src")
	require.Equal(t, fmt.Sprintf("%d 644\n%d 755\n%d 755\n", info.UID, info.UID, info.UID), string(owner.Stdout), "files belong to the box's account")

	list, err := h.ListWorkspace(ctx, "")
	require.NoError(t, err)
	var names []string
	for _, f := range list {
		names = append(names, f.Path+":"+f.Type)
	}
	require.Contains(t, names, "notes.txt:file")
	require.Contains(t, names, "src:directory")
	sub, err := h.ListWorkspace(ctx, "src/app")
	require.NoError(t, err)
	require.Equal(t, "src/app/main.sh", sub[0].Path)
	require.EqualValues(t, 8, sub[0].Size)

	body, fi, err := h.OpenWorkspaceFile(ctx, "notes.txt")
	require.NoError(t, err)
	got, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	require.Equal(t, "hello\n", string(got))
	require.EqualValues(t, 6, fi.Size)

	// Archives of a folder, with a link kept as a link.
	sh(t, h, "ln -s app/main.sh /workspace/src/link")
	arc, err := h.ArchiveWorkspace(ctx, "src", sandbox.ArchiveTar)
	require.NoError(t, err)
	tr := tar.NewReader(arc)
	entries := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		data, _ := io.ReadAll(tr)
		entries[hdr.Name] = string(data) + hdr.Linkname
	}
	require.NoError(t, arc.Close())
	require.Equal(t, map[string]string{"app/": "", "app/main.sh": "echo hi\n", "link": "app/main.sh"}, entries)
	arc, err = h.ArchiveWorkspace(ctx, "", sandbox.ArchiveZip)
	require.NoError(t, err)
	raw, err := io.ReadAll(arc)
	require.NoError(t, err)
	require.NoError(t, arc.Close())
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	require.NoError(t, err)
	zipped := map[string]bool{}
	for _, f := range zr.File {
		zipped[f.Name] = true
	}
	require.True(t, zipped["notes.txt"] && zipped["src/app/main.sh"], "zip holds %v", zipped)

	// A link that stays inside the workspace is followed.
	body, _, err = h.OpenWorkspaceFile(ctx, "src/link")
	require.NoError(t, err)
	got, err = io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	require.Equal(t, "echo hi\n", string(got))

	// Escapes are refused, whichever way they are tried.
	sh(t, h, "ln -s /etc /workspace/out && ln -s ../../etc/passwd /workspace/src/pw")
	for _, p := range []string{"../etc", "/etc/passwd", "a\x00b", "out/passwd", "out", "src/pw"} {
		_, _, err := h.OpenWorkspaceFile(ctx, p)
		require.ErrorIs(t, err, sandbox.ErrInvalidPath, "download %q", p)
		_, err = upload(ctx, h, file(p+"/x", "x"))
		require.ErrorIs(t, err, sandbox.ErrInvalidPath, "upload %q", p)
	}
	_, err = h.ListWorkspace(ctx, "out")
	require.ErrorIs(t, err, sandbox.ErrInvalidPath)
	_, err = h.ArchiveWorkspace(ctx, "out", sandbox.ArchiveTar)
	require.ErrorIs(t, err, sandbox.ErrInvalidPath)
	require.Equal(t, 1, sh(t, h, "test -e /etc/x").ExitCode, "nothing was written through the link")

	// Missing files, folders asked for as files.
	_, _, err = h.OpenWorkspaceFile(ctx, "nope.txt")
	require.ErrorIs(t, err, sandbox.ErrNoFile)
	_, _, err = h.OpenWorkspaceFile(ctx, "src")
	require.ErrorIs(t, err, sandbox.ErrIsFolder)

	// A cut upload leaves nothing, also of the files before the cut.
	_, err = upload(ctx, h, file("first.txt", "1"), sandbox.UploadFile{Path: "second.txt", Body: &failingReader{}})
	require.Error(t, err)
	left := sh(t, h, "ls -A /workspace")
	require.NotContains(t, string(left.Stdout), "first.txt")
	require.NotContains(t, string(left.Stdout), "second.txt")
	require.NotContains(t, string(left.Stdout), ".astrabox-upload")
}

// zeros yields n bytes without holding them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

func TestWorkspaceUploadStreamsInBoundedMemory(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	const size = 50 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = upload(ctx, h, sandbox.UploadFile{Path: "big.bin", Body: &zeros{n: size}})
	require.NoError(t, err)
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "the platform side buffered the upload")
	require.Equal(t, fmt.Sprint(size), strings.TrimSpace(string(sh(t, h, "stat -c %s /workspace/big.bin").Stdout)))
	// The runner, too, only streamed it: its peak resident memory stays far below the file.
	rec := mustRecord(t, b, h.ID())
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", rec.InitPID, rec.InitPID))
	require.NoError(t, err)
	runnerPID := strings.Fields(string(children))[0]
	status, err := os.ReadFile("/proc/" + runnerPID + "/status")
	require.NoError(t, err)
	var hwmKB int64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwmKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	t.Logf("upload of %d MiB: platform allocated %d KiB, runner peak RSS %d KiB", size>>20, (after.TotalAlloc-before.TotalAlloc)>>10, hwmKB)
	require.Positive(t, hwmKB)
	require.Less(t, hwmKB, int64(40<<10), "the runner buffered the upload")
}

// terminalReader follows a terminal's output and waits for text in it.
type terminalReader struct {
	t    *testing.T
	s    sandbox.OutputStream
	seen strings.Builder
	from int // waitFor looks after what earlier waits matched
	last int64
}

func (r *terminalReader) waitFor(text string) {
	r.t.Helper()
	for !strings.Contains(r.seen.String()[r.from:], text) {
		chunk, err := r.s.Next()
		require.NoError(r.t, err, "waiting for %q; saw %q", text, r.seen.String())
		r.seen.Write(chunk.Data)
		r.last = chunk.Offset
	}
	r.from += strings.Index(r.seen.String()[r.from:], text) + len(text)
}

// foreground is a terminal command that prints "started" once it runs as
// itself, then sleeps until interrupted.
const foreground = "sh -c 'echo started; exec sleep 1000'\n"

func TestTerminalOnABox(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	st, err := h.StartTerminal(ctx, sandbox.TerminalSpec{ID: "web", Cols: 80, Rows: 24})
	require.NoError(t, err)
	require.True(t, st.Running)
	again, err := h.StartTerminal(ctx, sandbox.TerminalSpec{ID: "web"})
	require.NoError(t, err)
	require.True(t, again.Existed)
	require.Equal(t, st.PID, again.PID)

	s, err := h.ReadTerminal(ctx, "web", 0)
	require.NoError(t, err)
	r := &terminalReader{t: t, s: s}
	// The shell prints its prompt once it has the terminal back from a command.
	require.NoError(t, h.WriteTerminal(ctx, "web", []byte("PS1='READY''> '; echo \"me=$(id -u) in $(pwd)\"\n")))
	info, _ := h.Info(ctx)
	r.waitFor(fmt.Sprintf("me=%d in /workspace\r\n", info.UID))
	r.waitFor("READY> ")

	require.NoError(t, h.ResizeTerminal(ctx, "web", 100, 30))
	require.NoError(t, h.WriteTerminal(ctx, "web", []byte("stty size\n")))
	r.waitFor("30 100\r\n")
	r.waitFor("READY> ")

	// Nothing in the foreground: the interrupt says so and signals nothing.
	ok, err := h.InterruptTerminal(ctx, "web")
	require.NoError(t, err)
	require.False(t, ok)

	// A second viewer that reconnects from offset 0 replays all of it; one
	// from the last offset sees only what follows.
	s2, err := h.ReadTerminal(ctx, "web", 0)
	require.NoError(t, err)
	replay := &terminalReader{t: t, s: s2}
	replay.waitFor("30 100")
	require.NoError(t, s2.Close())
	s3, err := h.ReadTerminal(ctx, "web", r.last)
	require.NoError(t, err)
	tail := &terminalReader{t: t, s: s3}

	// A foreground sleep is interrupted; the program's own process is not.
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "program", Argv: []string{"/bin/sh", "-c", "sleep 1000"}})
	require.NoError(t, err)
	// The command says when it runs: a SIGINT that reached the shell's child
	// before it became the command would be lost, as a too early Ctrl-C is.
	require.NoError(t, h.WriteTerminal(ctx, "web", []byte(foreground)))
	tail.waitFor("started\r\n")
	ok, err = h.InterruptTerminal(ctx, "web")
	require.NoError(t, err)
	require.True(t, ok)
	// An interactive shell drops the rest of a line whose command died of SIGINT:
	// ask for the status at the next prompt.
	tail.waitFor("READY> ")
	require.NoError(t, h.WriteTerminal(ctx, "web", []byte("echo \"rc=$?\"\n")))
	tail.waitFor("rc=130")
	require.NotContains(t, tail.seen.String(), "30 100", "a viewer resuming from its offset gets no repeats")
	ps, err := h.Process(ctx, "program")
	require.NoError(t, err)
	require.True(t, ps.Running, "the terminal's interrupt left the program alone")

	// And the other way round: signalling the program's group leaves a terminal command running.
	tail.waitFor("READY> ")
	require.NoError(t, h.WriteTerminal(ctx, "web", []byte(foreground)))
	tail.waitFor("started\r\n")
	require.NoError(t, h.Signal(ctx, "program", "SIGINT", true))
	_, err = h.Wait(ctx, "program")
	require.NoError(t, err)
	ok, err = h.InterruptTerminal(ctx, "web")
	require.NoError(t, err)
	require.True(t, ok, "the terminal's command outlived the program's interrupt")
	tail.waitFor("READY> ")
	require.NoError(t, s.Close())
	require.NoError(t, s3.Close())

	_, err = h.InterruptTerminal(ctx, "nope")
	require.ErrorIs(t, err, sandbox.ErrNoProcess)

	// A shell that exits ends its terminal, even while a job it left in the
	// background still holds the terminal open; the viewers' streams end.
	_, err = h.StartTerminal(ctx, sandbox.TerminalSpec{ID: "short", Argv: []string{"/bin/sh", "-c", "sleep 1000 & echo bye"}})
	require.NoError(t, err)
	short, err := h.ReadTerminal(ctx, "short", 0)
	require.NoError(t, err)
	var said strings.Builder
	for {
		chunk, err := short.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		said.Write(chunk.Data)
	}
	require.NoError(t, short.Close())
	require.Contains(t, said.String(), "bye")
	ended, err := h.Terminal(ctx, "short")
	require.NoError(t, err)
	require.False(t, ended.Running)
	require.Equal(t, 0, ended.Exit.Code)
	_, err = h.InterruptTerminal(ctx, "short")
	require.ErrorIs(t, err, sandbox.ErrProcessExited)
}
