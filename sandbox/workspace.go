package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// WorkspaceFiles is what a backend must provide for the Session workspace's files
// API. Paths are relative to the box's workspace folder ("" or "." is the folder
// itself) and are resolved inside the box with the program account's identity,
// never following a link out of the workspace: the OpenSandbox execd's
// /files/download, /files/upload and /directories/list map onto it once a
// backend resolves the relative path against its workspace mount.
type WorkspaceFiles interface {
	// ListWorkspace lists a folder's entries sorted by name. Entry paths are
	// relative to the workspace.
	ListWorkspace(ctx context.Context, path string) ([]FileInfo, error)
	// OpenWorkspaceFile streams one regular file; the FileInfo gives its size.
	// A folder is ErrIsFolder.
	OpenWorkspaceFile(ctx context.Context, path string) (io.ReadCloser, FileInfo, error)
	// ArchiveWorkspace streams a folder as an archive of the given format
	// (ArchiveTar or ArchiveZip), entries named relative to that folder. Links
	// are stored as links, never followed.
	ArchiveWorkspace(ctx context.Context, path string, format string) (io.ReadCloser, error)
	// UploadWorkspace writes files into the workspace, all or nothing: every
	// file is staged beside its target and renamed into place only once all
	// were received, so a failed or cut upload leaves nothing behind. Parent
	// folders are created. Files belong to the program account.
	UploadWorkspace(ctx context.Context, files UploadSource) ([]FileInfo, error)
}

// UploadSource yields the files of one upload in turn. Next returns io.EOF after
// the last file; each file's Body is read to its end before Next is called again.
type UploadSource interface {
	Next() (UploadFile, error)
}

// UploadFile is one file of an upload.
type UploadFile struct {
	// Path is relative to the workspace.
	Path string
	// Mode is the file's permission bits (0644 when zero).
	Mode uint32
	Body io.Reader
}

// Archive formats of ArchiveWorkspace.
const (
	ArchiveTar = "tar"
	ArchiveZip = "zip"
)

// Errors of workspace operations, checked with errors.Is.
var (
	// ErrInvalidPath refuses a path that is absolute, climbs with "..", holds a
	// NUL byte or leads out of the workspace through a link.
	ErrInvalidPath = errors.New("sandbox: invalid workspace path")
	// ErrNoFile reports a workspace path that does not exist.
	ErrNoFile = errors.New("sandbox: no such file")
	// ErrIsFolder refuses a file operation on a folder.
	ErrIsFolder = errors.New("sandbox: path is a folder")
	// ErrNotFolder refuses a folder operation on something else.
	ErrNotFolder = errors.New("sandbox: path is not a folder")
)

// CleanWorkspacePath checks a workspace-relative path lexically and returns it
// in clean form ("" for the workspace itself). It refuses absolute paths, ".."
// components, NUL bytes and backslashes; links are checked where the path is
// resolved, inside the box.
func CleanWorkspacePath(p string) (string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%w: contains a NUL byte", ErrInvalidPath)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q is absolute; give a path relative to the workspace", ErrInvalidPath, p)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("%w: %q contains a backslash", ErrInvalidPath, p)
	}
	var parts []string
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: %q climbs out with \"..\"", ErrInvalidPath, p)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "/"), nil
}

// Terminals is what a backend must provide for a Session's web terminal: an
// interactive shell on a pseudo-terminal, as the program account, whose output
// is kept in a bounded scrollback addressed by byte offset so that any number of
// viewers can follow it and a reconnecting viewer replays what it missed. The
// OpenSandbox execd's /pty API (POST /pty, GET /pty/{id}/ws?since=) maps onto it.
type Terminals interface {
	// StartTerminal starts the terminal id, or returns the running one's status
	// (Existed set). A terminal whose shell has exited is started afresh; its
	// offsets continue after the old output.
	StartTerminal(ctx context.Context, spec TerminalSpec) (TerminalStatus, error)
	// Terminal reports a terminal's status; an unknown id is ErrNoProcess.
	Terminal(ctx context.Context, id string) (TerminalStatus, error)
	// WriteTerminal sends keystrokes to the terminal.
	WriteTerminal(ctx context.Context, id string, data []byte) error
	// ResizeTerminal sets the terminal's window size.
	ResizeTerminal(ctx context.Context, id string, cols, rows int) error
	// InterruptTerminal sends SIGINT to the terminal's foreground process group
	// and reports whether one was running (false when the shell itself waits at
	// its prompt, in which case nothing is signalled).
	InterruptTerminal(ctx context.Context, id string) (bool, error)
	// ReadTerminal streams output after the byte offset, following new output
	// until ctx ends or the shell exits. Each chunk's Offset is the offset just
	// after its last byte, so a viewer resumes with the last Offset it saw.
	// Output older than the scrollback is gone: the first chunk then starts
	// later than after (Offset-len(Data) > after).
	ReadTerminal(ctx context.Context, id string, after int64) (OutputStream, error)
}

// TerminalSpec starts a terminal.
type TerminalSpec struct {
	ID string `json:"id"`
	// Argv is the shell (default: bash, else sh, interactive).
	Argv []string          `json:"argv,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	Cols int               `json:"cols,omitempty"`
	Rows int               `json:"rows,omitempty"`
	// Scrollback bounds the output kept for replay, in bytes (default 1 MiB).
	Scrollback int `json:"scrollback,omitempty"`
}

// Validate checks the spec before it is sent anywhere.
func (t TerminalSpec) Validate() error {
	if !ValidName(t.ID) {
		return fmt.Errorf("%w: terminal id %q", ErrInvalidSpec, t.ID)
	}
	if t.Cols < 0 || t.Rows < 0 || t.Cols > MaxTerminalSide || t.Rows > MaxTerminalSide {
		return fmt.Errorf("%w: terminal size %dx%d", ErrInvalidSpec, t.Cols, t.Rows)
	}
	if t.Scrollback < 0 {
		return fmt.Errorf("%w: scrollback %d", ErrInvalidSpec, t.Scrollback)
	}
	return nil
}

// MaxTerminalSide bounds a terminal's columns and rows.
const MaxTerminalSide = 1000

// TerminalStatus describes a terminal. Offsets count bytes of output since the
// terminal id was first started.
type TerminalStatus struct {
	ID      string `json:"id"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	// Offset is the number of bytes of output so far; FirstOffset is the offset
	// after which the scrollback still holds output.
	Offset      int64       `json:"offset"`
	FirstOffset int64       `json:"first_offset"`
	StartedAt   time.Time   `json:"started_at"`
	Exit        *ExitStatus `json:"exit,omitempty"`
	Existed     bool        `json:"existed,omitempty"`
}
