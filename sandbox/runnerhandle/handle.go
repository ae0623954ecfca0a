// Package runnerhandle is the part of sandbox.Handle that every backend whose
// boxes run astrabox-runner shares: each call goes to the box's runner client,
// specs are validated first, and a failed call's error is marked
// sandbox.ErrBoxLost when the backend says the box is gone.
//
// It is a package of its own rather than part of sandbox/runnerapi because
// runnerapi is the runner's wire protocol, built into the runner binary as well
// as the worker; this is host-side policy on top of it (what counts as a lost
// box, which op names errors carry) that only backends need.
package runnerhandle

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// LostFunc tells whether a failed call's error comes from a box that is gone.
// When it is, why says so in a few words ("its Sandbox is gone", or a death's
// "reason: message"). It is asked only after a call failed, so it may ask the
// backend's platform. ctx is the failed call's and may have ended.
type LostFunc func(ctx context.Context, err error) (why string, lost bool)

// Handle implements every sandbox.Handle method that is a plain call on the
// runner. A backend's handle embeds it and adds ID, Info and Close, and
// overrides the methods where the backend really differs (the local backend
// replays a dead box's journal from disk, for one).
type Handle struct {
	c    *runnerapi.Client
	lost LostFunc
}

// New returns a Handle driving the box through c; lost classifies the errors of
// failed calls.
func New(c *runnerapi.Client, lost LostFunc) Handle {
	return Handle{c: c, lost: lost}
}

// Client is the box's runner client, for what the backend does beyond
// sandbox.Handle (readiness checks, services, tunnels, shutdown).
func (h *Handle) Client() *runnerapi.Client { return h.c }

// Wrap prefixes err with op and, when the box is gone, marks it as
// sandbox.ErrBoxLost, so callers can tell a lost box from a lost connection.
// A nil err stays nil.
func (h *Handle) Wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if why, lost := h.lost(ctx, err); lost {
		return fmt.Errorf("%s: %w (%s): %v", op, sandbox.ErrBoxLost, why, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// DeathReason is how a LostFunc words a box's recorded death.
func DeathReason(d *sandbox.Death) string { return d.Reason + ": " + d.Message }

// RunnerBuild asks the box's runner which build it is, for the runtime-info snapshot.
func (h *Handle) RunnerBuild(ctx context.Context) (string, error) {
	info, err := h.c.Info(ctx)
	return info.Build, h.Wrap(ctx, "runner info", err)
}

// The methods below implement sandbox.Handle (documented there).

func (h *Handle) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.ProcessStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.ProcessStatus{}, err
	}
	st, err := h.c.StartProcess(ctx, spec)
	return st, h.Wrap(ctx, "start process", err)
}

func (h *Handle) Process(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Process(ctx, id)
	return st, h.Wrap(ctx, "process status", err)
}

func (h *Handle) WriteStdin(ctx context.Context, id, writeID string, data []byte) (sandbox.WriteResult, error) {
	res, err := h.c.WriteStdin(ctx, id, writeID, data)
	return res, h.Wrap(ctx, "write stdin", err)
}

func (h *Handle) CloseStdin(ctx context.Context, id string) error {
	return h.Wrap(ctx, "close stdin", h.c.CloseStdin(ctx, id))
}

func (h *Handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.c.Output(ctx, id, after, follow)
	if err != nil {
		return nil, h.Wrap(ctx, "read output", err)
	}
	return s, nil
}

func (h *Handle) CommitOutput(ctx context.Context, id string, through int64) error {
	return h.Wrap(ctx, "commit output", h.c.CommitOutput(ctx, id, through))
}

func (h *Handle) Signal(ctx context.Context, id, signal string, group bool) error {
	return h.Wrap(ctx, "signal", h.c.Signal(ctx, id, signal, group))
}

func (h *Handle) Wait(ctx context.Context, id string) (sandbox.ProcessStatus, error) {
	st, err := h.c.Wait(ctx, id)
	return st, h.Wrap(ctx, "wait", err)
}

func (h *Handle) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := h.c.Exec(ctx, req)
	return res, h.Wrap(ctx, "exec", err)
}

func (h *Handle) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := h.c.ReadFile(ctx, path)
	return data, h.Wrap(ctx, "read file", err)
}

func (h *Handle) ReadFileFrom(ctx context.Context, path string, offset int64) ([]byte, int64, error) {
	data, size, err := h.c.ReadFileFrom(ctx, path, offset)
	return data, size, h.Wrap(ctx, "read file", err)
}

func (h *Handle) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	return h.Wrap(ctx, "write file", h.c.WriteFile(ctx, path, data, mode))
}

func (h *Handle) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListDir(ctx, path)
	return out, h.Wrap(ctx, "list dir", err)
}

func (h *Handle) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := h.c.DialPort(ctx, port)
	return conn, h.Wrap(ctx, "dial port", err)
}

// WaitPort dials every 20ms until the port accepts: nothing announces that a
// program started listening. It does not ask whether the box is gone on the way,
// since that may cost a call to the platform per attempt; ctx bounds it.
func (h *Handle) WaitPort(ctx context.Context, port int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := h.c.DialPort(ctx, port)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for port %d: %w (last error: %v)", port, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
