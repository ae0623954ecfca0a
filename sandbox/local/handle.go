package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// handle drives one box through its runner's socket.
type handle struct {
	b *Backend
	x *box
	c *runnerapi.Client
}

var _ sandbox.Handle = (*handle)(nil)

func (b *Backend) newHandle(x *box) *handle {
	return &handle{b: b, x: x, c: runnerapi.NewClient(filepath.Join(x.dir, "control", runnerapi.SocketName))}
}

// The methods below implement sandbox.Handle (documented there).

func (h *handle) ID() string { return h.x.record().ID }

func (h *handle) Info(context.Context) (sandbox.Info, error) { return h.b.info(h.x), nil }

func (h *handle) Close() error { return h.c.Close() }

// RunnerBuild asks the box's runner which build it is, for the runtime-info snapshot.
func (h *handle) RunnerBuild(ctx context.Context) (string, error) {
	info, err := h.c.Info(ctx)
	return info.Build, h.wrap("runner info", err)
}

// wrap marks errors of a box that has died as ErrBoxLost, so callers can tell a
// lost box from a lost connection.
func (h *handle) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if d := h.x.deathInfo(); d != nil {
		return fmt.Errorf("%s: %w (%s: %s): %v", op, sandbox.ErrBoxLost, d.Reason, d.Message, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (h *handle) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.ProcessStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.ProcessStatus{}, err
	}
	st, err := h.c.StartProcess(ctx, spec)
	return st, h.wrap("start process", err)
}

func (h *handle) Process(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Process(ctx, id)
	return st, h.wrap("process status", err)
}

func (h *handle) WriteStdin(ctx context.Context, id, writeID string, data []byte) (sandbox.WriteResult, error) {
	res, err := h.c.WriteStdin(ctx, id, writeID, data)
	return res, h.wrap("write stdin", err)
}

func (h *handle) CloseStdin(ctx context.Context, id string) error {
	return h.wrap("close stdin", h.c.CloseStdin(ctx, id))
}

func (h *handle) CommitOutput(ctx context.Context, id string, through int64) error {
	return h.wrap("commit output", h.c.CommitOutput(ctx, id, through))
}

func (h *handle) Signal(ctx context.Context, id, signal string, group bool) error {
	return h.wrap("signal", h.c.Signal(ctx, id, signal, group))
}

func (h *handle) Wait(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Wait(ctx, id)
	return st, h.wrap("wait", err)
}

// ReadOutput streams from the runner; once the box is gone it replays the
// journal the runner left on the host, so the last lines are never lost.
func (h *handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.c.Output(ctx, id, after, follow)
	if err == nil {
		return s, nil
	}
	if h.x.deathInfo() != nil {
		rec := h.x.record()
		f, ferr := openControl(h.x.dir, filepath.Join("boots", rec.BootID, "proc", id, "journal"))
		if ferr == nil {
			return &journalFile{f: f, dec: runnerapi.NewDecoder(skipReleased(f)), next: after + 1}, nil
		}
	}
	return nil, h.wrap("read output", err)
}

// skipReleased positions a journal reader after the bytes CommitOutput gave
// back: a hole (found with SEEK_DATA) and the zeros of its last partial block.
func skipReleased(f *os.File) io.Reader {
	const seekData = 3
	if _, err := f.Seek(0, seekData); err != nil {
		_, _ = f.Seek(0, io.SeekStart)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		c, err := br.ReadByte()
		if err != nil {
			return br
		}
		if c != 0 {
			_ = br.UnreadByte()
			return br
		}
	}
}

// journalFile replays a journal from disk, checking that offsets follow on
// from the requested one (a released prefix cannot be replayed).
type journalFile struct {
	f    *os.File
	dec  *runnerapi.Decoder
	next int64
}

func (j *journalFile) Next() (sandbox.OutputLine, error) {
	for {
		l, err := j.dec.Next()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return l, io.EOF // a torn last record was never acknowledged
		}
		if err != nil {
			return l, err
		}
		switch {
		case l.Offset < j.next:
			continue
		case l.Offset > j.next:
			return sandbox.OutputLine{}, fmt.Errorf("replay from %d: %w", j.next, sandbox.ErrOutputReleased)
		}
		j.next++
		return l, nil
	}
}

func (j *journalFile) Close() error { return j.f.Close() }

func (h *handle) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := h.c.Exec(ctx, req)
	return res, h.wrap("exec", err)
}

func (h *handle) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := h.c.ReadFile(ctx, path)
	return data, h.wrap("read file", err)
}

func (h *handle) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	return h.wrap("write file", h.c.WriteFile(ctx, path, data, mode))
}

func (h *handle) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListDir(ctx, path)
	return out, h.wrap("list dir", err)
}

func (h *handle) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := h.c.DialPort(ctx, port)
	return conn, h.wrap("dial port", err)
}

// WaitPort dials until the port accepts. There is no event for "a program
// started listening", so this polls with a short interval.
func (h *handle) WaitPort(ctx context.Context, port int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.c.DialPort(ctx, port)
		if err == nil {
			return conn.Close()
		}
		if h.x.deathInfo() != nil {
			return h.wrap("wait port", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for port %d: %w (last error: %v)", port, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (h *handle) ListWorkspace(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListWorkspace(ctx, path)
	return out, h.wrap("list workspace", err)
}

func (h *handle) OpenWorkspaceFile(ctx context.Context, path string) (io.ReadCloser, sandbox.FileInfo, error) {
	body, info, err := h.c.OpenWorkspaceFile(ctx, path)
	return body, info, h.wrap("open workspace file", err)
}

func (h *handle) ArchiveWorkspace(ctx context.Context, path, format string) (io.ReadCloser, error) {
	body, err := h.c.ArchiveWorkspace(ctx, path, format)
	return body, h.wrap("archive workspace", err)
}

func (h *handle) UploadWorkspace(ctx context.Context, files sandbox.UploadSource) ([]sandbox.FileInfo, error) {
	out, err := h.c.UploadWorkspace(ctx, files)
	return out, h.wrap("upload to workspace", err)
}

func (h *handle) StartTerminal(ctx context.Context, spec sandbox.TerminalSpec) (sandbox.TerminalStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.TerminalStatus{}, err
	}
	st, err := h.c.StartTerminal(ctx, spec)
	return st, h.wrap("start terminal", err)
}

func (h *handle) Terminal(ctx context.Context, id string) (sandbox.TerminalStatus, error) {
	st, err := h.c.Terminal(ctx, id)
	return st, h.wrap("terminal status", err)
}

func (h *handle) WriteTerminal(ctx context.Context, id string, data []byte) error {
	return h.wrap("write terminal", h.c.WriteTerminal(ctx, id, data))
}

func (h *handle) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	return h.wrap("resize terminal", h.c.ResizeTerminal(ctx, id, cols, rows))
}

func (h *handle) InterruptTerminal(ctx context.Context, id string) (bool, error) {
	ok, err := h.c.InterruptTerminal(ctx, id)
	return ok, h.wrap("interrupt terminal", err)
}

func (h *handle) ReadTerminal(ctx context.Context, id string, after int64) (sandbox.OutputStream, error) {
	s, err := h.c.ReadTerminal(ctx, id, after)
	return s, h.wrap("read terminal", err)
}
