package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// handle drives one box through its runner's endpoint.
type handle struct {
	b  *Backend
	id string
	c  *runnerapi.Client
}

var _ sandbox.Handle = (*handle)(nil)

// The methods below implement sandbox.Handle (documented there).

func (h *handle) ID() string { return h.id }

// Close is a no-op: a handle's connections are the backend's pooled ones,
// which other handles reuse; Backend.Close drops them.
func (h *handle) Close() error { return nil }

func (h *handle) Info(ctx context.Context) (sandbox.Info, error) {
	in, err := h.b.api.get(ctx, h.id)
	if errors.Is(err, errNotFound) {
		return sandbox.Info{ID: h.id, State: sandbox.StateTerminated, Death: &sandbox.Death{BoxID: h.id, Reason: "vanished",
			Message: "the OpenSandbox server no longer has the box", At: time.Now().UTC()}}, nil
	}
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("opensandbox: box %s: %w", h.id, err)
	}
	info := toInfo(in)
	if info.State == sandbox.StateRunning {
		if ri, err := h.c.Info(ctx); err == nil {
			info.BootID = ri.BootID
		}
	}
	return info, nil
}

// RunnerBuild asks the box's runner which build it is, for the runtime-info snapshot.
func (h *handle) RunnerBuild(ctx context.Context) (string, error) {
	info, err := h.c.Info(ctx)
	return info.Build, h.wrap(ctx, "runner info", err)
}

// wrap marks errors of a box the server reports ended, or no longer has, as
// ErrBoxLost, so callers can tell a lost box from a lost connection.
func (h *handle) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if isRunnerAnswer(err) {
		return fmt.Errorf("%s: %w", op, err) // the runner answered: the box is there
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.b.opts.RequestTimeout)
	defer cancel()
	in, gerr := h.b.api.get(qctx, h.id)
	if errors.Is(gerr, errNotFound) {
		return fmt.Errorf("%s: %w (vanished from the OpenSandbox server): %v", op, sandbox.ErrBoxLost, err)
	}
	if gerr == nil {
		if d := toInfo(in).Death; d != nil {
			return fmt.Errorf("%s: %w (%s: %s): %v", op, sandbox.ErrBoxLost, d.Reason, d.Message, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isRunnerAnswer reports whether err is an error the runner sent (a sentinel of
// the sandbox package), as opposed to a transport failure.
func isRunnerAnswer(err error) bool {
	for _, s := range []error{sandbox.ErrNoProcess, sandbox.ErrProcessExited, sandbox.ErrStdinClosed, sandbox.ErrInvalidSpec,
		sandbox.ErrInvalidPath, sandbox.ErrNoFile, sandbox.ErrIsFolder, sandbox.ErrNotFolder, sandbox.ErrOutputReleased,
		sandbox.ErrJournalFailing} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func (h *handle) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.ProcessStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.ProcessStatus{}, err
	}
	st, err := h.c.StartProcess(ctx, spec)
	return st, h.wrap(ctx, "start process", err)
}

func (h *handle) Process(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Process(ctx, id)
	return st, h.wrap(ctx, "process status", err)
}

func (h *handle) WriteStdin(ctx context.Context, id, writeID string, data []byte) (sandbox.WriteResult, error) {
	res, err := h.c.WriteStdin(ctx, id, writeID, data)
	return res, h.wrap(ctx, "write stdin", err)
}

func (h *handle) CloseStdin(ctx context.Context, id string) error {
	return h.wrap(ctx, "close stdin", h.c.CloseStdin(ctx, id))
}

func (h *handle) CommitOutput(ctx context.Context, id string, through int64) error {
	return h.wrap(ctx, "commit output", h.c.CommitOutput(ctx, id, through))
}

func (h *handle) Signal(ctx context.Context, id, signal string, group bool) error {
	return h.wrap(ctx, "signal", h.c.Signal(ctx, id, signal, group))
}

func (h *handle) Wait(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Wait(ctx, id)
	return st, h.wrap(ctx, "wait", err)
}

// ReadOutput streams from the runner. Unlike a local box, a remote box's
// journal is gone with the box: lines not read before it ended are lost, and
// the stream's error says the box is.
func (h *handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.c.Output(ctx, id, after, follow)
	if err != nil {
		return nil, h.wrap(ctx, "read output", err)
	}
	return &outputStream{s: s, h: h, ctx: ctx}, nil
}

// outputStream marks a broken stream of a box that is gone as ErrBoxLost.
type outputStream struct {
	s   sandbox.OutputStream
	h   *handle
	ctx context.Context
}

func (o *outputStream) Next() (sandbox.OutputLine, error) {
	l, err := o.s.Next()
	if err != nil && !errors.Is(err, io.EOF) {
		return l, o.h.wrap(o.ctx, "read output", err)
	}
	return l, err
}

func (o *outputStream) Close() error { return o.s.Close() }

func (h *handle) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := h.c.Exec(ctx, req)
	return res, h.wrap(ctx, "exec", err)
}

func (h *handle) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := h.c.ReadFile(ctx, path)
	return data, h.wrap(ctx, "read file", err)
}

func (h *handle) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	return h.wrap(ctx, "write file", h.c.WriteFile(ctx, path, data, mode))
}

func (h *handle) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListDir(ctx, path)
	return out, h.wrap(ctx, "list dir", err)
}

func (h *handle) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := h.c.DialPort(ctx, port)
	return conn, h.wrap(ctx, "dial port", err)
}

// WaitPort dials until the port accepts.
func (h *handle) WaitPort(ctx context.Context, port int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.c.DialPort(ctx, port)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return h.wrap(ctx, fmt.Sprintf("wait for port %d", port), fmt.Errorf("%w (last error: %v)", ctx.Err(), err))
		case <-tick.C:
		}
	}
}

// waitService waits for a resident service's ready port, failing early when
// the service exits.
func (h *handle) waitService(ctx context.Context, svc sandbox.Service) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.c.DialPort(ctx, svc.ReadyPort)
		if err == nil {
			return conn.Close()
		}
		if st, serr := h.c.Process(ctx, svc.Process.ID); serr == nil && st.Exit != nil {
			return &sandbox.NotReadyError{Service: svc.Process.ID, Port: svc.ReadyPort,
				Reason: fmt.Sprintf("exited with code %d before listening", st.Exit.Code)}
		}
		select {
		case <-ctx.Done():
			return &sandbox.NotReadyError{Service: svc.Process.ID, Port: svc.ReadyPort, Reason: fmt.Sprintf("not listening in time: %v", err)}
		case <-tick.C:
		}
	}
}

func (h *handle) ListWorkspace(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListWorkspace(ctx, path)
	return out, h.wrap(ctx, "list workspace", err)
}

func (h *handle) OpenWorkspaceFile(ctx context.Context, path string) (io.ReadCloser, sandbox.FileInfo, error) {
	body, info, err := h.c.OpenWorkspaceFile(ctx, path)
	return body, info, h.wrap(ctx, "open workspace file", err)
}

func (h *handle) ArchiveWorkspace(ctx context.Context, path, format string) (io.ReadCloser, error) {
	body, err := h.c.ArchiveWorkspace(ctx, path, format)
	return body, h.wrap(ctx, "archive workspace", err)
}

func (h *handle) UploadWorkspace(ctx context.Context, files sandbox.UploadSource) ([]sandbox.FileInfo, error) {
	out, err := h.c.UploadWorkspace(ctx, files)
	return out, h.wrap(ctx, "upload to workspace", err)
}

func (h *handle) StartTerminal(ctx context.Context, spec sandbox.TerminalSpec) (sandbox.TerminalStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.TerminalStatus{}, err
	}
	st, err := h.c.StartTerminal(ctx, spec)
	return st, h.wrap(ctx, "start terminal", err)
}

func (h *handle) Terminal(ctx context.Context, id string) (sandbox.TerminalStatus, error) {
	st, err := h.c.Terminal(ctx, id)
	return st, h.wrap(ctx, "terminal status", err)
}

func (h *handle) WriteTerminal(ctx context.Context, id string, data []byte) error {
	return h.wrap(ctx, "write terminal", h.c.WriteTerminal(ctx, id, data))
}

func (h *handle) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	return h.wrap(ctx, "resize terminal", h.c.ResizeTerminal(ctx, id, cols, rows))
}

func (h *handle) InterruptTerminal(ctx context.Context, id string) (bool, error) {
	ok, err := h.c.InterruptTerminal(ctx, id)
	return ok, h.wrap(ctx, "interrupt terminal", err)
}

func (h *handle) ReadTerminal(ctx context.Context, id string, after int64) (sandbox.OutputStream, error) {
	s, err := h.c.ReadTerminal(ctx, id, after)
	return s, h.wrap(ctx, "read terminal", err)
}
