package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
	"github.com/astrabox/astrabox/sandbox/runnerhandle"
)

// handle drives one box through its runner's endpoint. The runner calls are
// runnerhandle's; a failed one that the runner did not answer asks the server
// whether the box is lost, and so does a broken output stream.
type handle struct {
	runnerhandle.Handle
	b  *Backend
	id string
}

var _ sandbox.Handle = (*handle)(nil)

func (b *Backend) newHandle(id string, c *runnerapi.Client) *handle {
	lost := func(ctx context.Context, err error) (string, bool) { return b.boxLost(ctx, id, err) }
	return &handle{Handle: runnerhandle.New(c, lost), b: b, id: id}
}

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
		if ri, err := h.Client().Info(ctx); err == nil {
			info.BootID = ri.BootID
		}
	}
	return info, nil
}

// boxLost tells runnerhandle whether box id is gone: the server reports it
// ended, or no longer has it. An error the runner answered needs no question:
// the box is there.
func (b *Backend) boxLost(ctx context.Context, id string, err error) (string, bool) {
	if isRunnerAnswer(err) {
		return "", false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.RequestTimeout)
	defer cancel()
	in, gerr := b.api.get(qctx, id)
	if errors.Is(gerr, errNotFound) {
		return "vanished from the OpenSandbox server", true
	}
	if gerr == nil {
		if d := toInfo(in).Death; d != nil {
			return runnerhandle.DeathReason(d), true
		}
	}
	return "", false
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

// ReadOutput streams from the runner. Unlike a local box, a remote box's
// journal is gone with the box: lines not read before it ended are lost, and
// the stream's error says the box is.
func (h *handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.Client().Output(ctx, id, after, follow)
	if err != nil {
		return nil, h.Wrap(ctx, "read output", err)
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
		return l, o.h.Wrap(o.ctx, "read output", err)
	}
	return l, err
}

func (o *outputStream) Close() error { return o.s.Close() }

// WaitPort dials until the port accepts. Unlike runnerhandle's, it polls
// every 50ms, each dial being a round trip to a remote box, and asks
// whether the box is lost once ctx has ended.
func (h *handle) WaitPort(ctx context.Context, port int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.Client().DialPort(ctx, port)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return h.Wrap(ctx, fmt.Sprintf("wait for port %d", port), fmt.Errorf("%w (last error: %v)", ctx.Err(), err))
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
		conn, err := h.Client().DialPort(ctx, svc.ReadyPort)
		if err == nil {
			return conn.Close()
		}
		if st, serr := h.Client().Process(ctx, svc.Process.ID); serr == nil && st.Exit != nil {
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
