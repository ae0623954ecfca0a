package runnerhandle

import (
	"context"
	"io"

	"github.com/astrabox/astrabox/sandbox"
)

// The methods below implement sandbox.WorkspaceFiles and sandbox.Terminals
// (documented there).

func (h *Handle) ListWorkspace(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	out, err := h.c.ListWorkspace(ctx, path)
	return out, h.Wrap(ctx, "list workspace", err)
}

func (h *Handle) OpenWorkspaceFile(ctx context.Context, path string) (io.ReadCloser, sandbox.FileInfo, error) {
	body, info, err := h.c.OpenWorkspaceFile(ctx, path)
	return body, info, h.Wrap(ctx, "open workspace file", err)
}

func (h *Handle) ArchiveWorkspace(ctx context.Context, path, format string) (io.ReadCloser, error) {
	body, err := h.c.ArchiveWorkspace(ctx, path, format)
	return body, h.Wrap(ctx, "archive workspace", err)
}

func (h *Handle) UploadWorkspace(ctx context.Context, files sandbox.UploadSource) ([]sandbox.FileInfo, error) {
	out, err := h.c.UploadWorkspace(ctx, files)
	return out, h.Wrap(ctx, "upload to workspace", err)
}

func (h *Handle) StartTerminal(ctx context.Context, spec sandbox.TerminalSpec) (sandbox.TerminalStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.TerminalStatus{}, err
	}
	st, err := h.c.StartTerminal(ctx, spec)
	return st, h.Wrap(ctx, "start terminal", err)
}

func (h *Handle) Terminal(ctx context.Context, id string) (sandbox.TerminalStatus, error) {
	st, err := h.c.Terminal(ctx, id)
	return st, h.Wrap(ctx, "terminal status", err)
}

func (h *Handle) WriteTerminal(ctx context.Context, id string, data []byte) error {
	return h.Wrap(ctx, "write terminal", h.c.WriteTerminal(ctx, id, data))
}

func (h *Handle) ResizeTerminal(ctx context.Context, id string, cols, rows int) error {
	return h.Wrap(ctx, "resize terminal", h.c.ResizeTerminal(ctx, id, cols, rows))
}

func (h *Handle) InterruptTerminal(ctx context.Context, id string) (bool, error) {
	ok, err := h.c.InterruptTerminal(ctx, id)
	return ok, h.Wrap(ctx, "interrupt terminal", err)
}

func (h *Handle) ReadTerminal(ctx context.Context, id string, after int64) (sandbox.OutputStream, error) {
	s, err := h.c.ReadTerminal(ctx, id, after)
	return s, h.Wrap(ctx, "read terminal", err)
}
