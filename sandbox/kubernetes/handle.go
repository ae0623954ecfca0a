package kubernetes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// handle drives one box through its runner, over TCP to the Sandbox's service.
type handle struct {
	b  *Backend
	id string
	c  *runnerapi.Client
}

var _ sandbox.Handle = (*handle)(nil)

// runnerConfigOf reads the runner configuration from a box's Secret: from data
// (base64, as the API server stores it) or stringData (as written).
func runnerConfigOf(secret *unstructured.Unstructured) (runnerapi.Config, error) {
	var cfg runnerapi.Config
	var raw []byte
	if enc, ok, _ := unstructured.NestedString(secret.Object, "data", runnerConfigKey); ok {
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return cfg, fmt.Errorf("Secret %s: %s is not base64: %w", secret.GetName(), runnerConfigKey, err)
		}
		raw = dec
	} else if s, ok, _ := unstructured.NestedString(secret.Object, "stringData", runnerConfigKey); ok {
		raw = []byte(s)
	} else {
		return cfg, fmt.Errorf("Secret %s has no %s", secret.GetName(), runnerConfigKey)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("Secret %s: decode %s: %w", secret.GetName(), runnerConfigKey, err)
	}
	if cfg.Token == "" {
		return cfg, fmt.Errorf("Secret %s: the runner has no token", secret.GetName())
	}
	return cfg, nil
}

// wrap marks errors of a box that has died as ErrBoxLost, so callers can tell a
// lost box from a lost connection; it asks the cluster only when a call failed.
func (h *handle) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, serr := h.b.observe(ctx, h.id)
	switch {
	case errors.Is(serr, sandbox.ErrNotFound):
		return fmt.Errorf("%s: %w (its Sandbox is gone): %v", op, sandbox.ErrBoxLost, err)
	case serr == nil && st.death != nil:
		return fmt.Errorf("%s: %w (%s: %s): %v", op, sandbox.ErrBoxLost, st.death.Reason, st.death.Message, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// The methods below implement sandbox.Handle (documented there).

func (h *handle) ID() string { return h.id }

func (h *handle) Close() error { return h.c.Close() }

func (h *handle) Info(ctx context.Context) (sandbox.Info, error) {
	st, err := h.b.observe(ctx, h.id)
	if err != nil {
		return sandbox.Info{}, err
	}
	in := st.info()
	if in.State == sandbox.StateRunning {
		if ri, err := h.c.Info(ctx); err == nil {
			in.BootID = ri.BootID
		}
	}
	return in, nil
}

// RunnerBuild asks the box's runner which build it is, for the runtime-info snapshot.
func (h *handle) RunnerBuild(ctx context.Context) (string, error) {
	info, err := h.c.Info(ctx)
	return info.Build, h.wrap("runner info", err)
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

func (h *handle) ReadOutput(ctx context.Context, id string, after int64, follow bool) (sandbox.OutputStream, error) {
	s, err := h.c.Output(ctx, id, after, follow)
	if err != nil {
		return nil, h.wrap("read output", err)
	}
	return s, nil
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

// WaitPort dials until the port accepts; nothing announces a listening program.
func (h *handle) WaitPort(ctx context.Context, port int) error {
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
