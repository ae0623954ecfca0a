// Package sandbox defines how AstraBox talks to the boxes that hold Agent programs:
// a Backend creates, claims, finds, pauses and destroys boxes and reports their
// death; a Handle drives one box (long-lived process sessions, exec, files and
// published ports). Backends live in sub-packages (sandbox/local is the embedded
// bubblewrap default); the types here are shaped so that the OpenSandbox lifecycle
// API and its in-box execd can implement them unchanged (see docs/sandboxes.md).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Capabilities is what a backend declares it can do on this machine. The platform
// refuses RuntimeProfiles that need a capability the selected backend lacks.
type Capabilities struct {
	// ProcessSessions: the Handle can start long-lived processes driven over
	// stdin/stdout with replayable output (requires_process_sessions in the seed).
	ProcessSessions bool `json:"process_sessions"`
	// IsolatedAccounts: every box runs as its own OS account, so conversations in
	// different boxes cannot read each other's files.
	IsolatedAccounts bool `json:"isolated_accounts"`
	// IsolatedSessions: one box can carry several conversations, each in its own
	// account and home that the others cannot read (sandbox_tenancy "shared").
	IsolatedSessions bool `json:"isolated_sessions"`
	// Pause: Pause and Resume freeze and thaw a box.
	Pause bool `json:"pause"`
	// Prewarm: Claim can hand out boxes made ready before any Session asked.
	Prewarm bool `json:"prewarm"`
	// PersistentWorkspace: a workspace volume outlives the boxes that mount it.
	PersistentWorkspace bool `json:"persistent_workspace"`
	// ResourceLimits: Spec.Limits are enforced (cgroups or the backend's own).
	ResourceLimits bool `json:"resource_limits"`
	// Notes explains in words what is missing or degraded on this machine, for
	// logs and operators (for example "no cgroup freezer: pause uses SIGSTOP").
	Notes []string `json:"notes,omitempty"`
}

// Backend creates and manages boxes. Every method is safe for concurrent use.
type Backend interface {
	// Capabilities reports what this backend can do on this machine.
	Capabilities() Capabilities
	// Create starts a new box from spec and returns once its control service
	// answers and its resident services are ready. The spec is validated before
	// anything starts.
	Create(ctx context.Context, spec Spec) (Handle, error)
	// Claim hands out a box that was prepared before anyone asked, from the pool
	// of the given RuntimeProfile key. It returns ErrNoWarmBox when none is ready;
	// the caller then falls back to Create.
	Claim(ctx context.Context, profileKey string) (Handle, error)
	// Get returns a handle on an existing box, also one created by an earlier
	// process of the platform. It returns ErrNotFound for an unknown id.
	Get(ctx context.Context, id string) (Handle, error)
	// List describes every box this backend knows, running or lost.
	List(ctx context.Context) ([]Info, error)
	// Release stops a box gracefully and frees its compute; a persistent
	// workspace volume is kept.
	Release(ctx context.Context, id string) error
	// Destroy stops a box at once and removes everything it owns except
	// persistent workspace volumes. Destroying an unknown box is not an error.
	Destroy(ctx context.Context, id string) error
	// Pause freezes every process of the box.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused box.
	Resume(ctx context.Context, id string) error
	// Watch returns a channel that receives one Death when the box is lost and is
	// then closed. A box already lost reports at once. A lost connection to the
	// box is not a death: only the end of the box or its control service is.
	Watch(ctx context.Context, id string) (<-chan Death, error)
	// Reap destroys every box that keep does not claim, including boxes left by a
	// crash of the whole platform; boxes waiting in this backend's prewarm pool
	// are kept. It returns the ids it destroyed.
	Reap(ctx context.Context, keep func(id string) bool) ([]string, error)
	// Close stops watching and drops connections; boxes keep running.
	Close() error
}

// Prewarmer is a backend whose prewarm pools can be added while it runs: a
// RuntimeProfile saved after the backend started that asks for prewarmed boxes
// (prewarm_size) gets its pool without a restart.
type Prewarmer interface {
	// EnsurePrewarm starts the pool of size boxes made from spec under profileKey,
	// unless the backend keeps one for that key already; it reports whether it did.
	EnsurePrewarm(profileKey string, spec Spec, size int) (bool, error)
}

// Handle drives one box. Closing a Handle drops its connections only; the box and
// its processes keep running.
type Handle interface {
	// ID is the backend's id of the box.
	ID() string
	// Info describes the box now.
	Info(ctx context.Context) (Info, error)

	// StartProcess starts a long-lived process session. Starting an id that
	// already exists returns that process's status (a retried start is safe).
	StartProcess(ctx context.Context, spec ProcessSpec) (ProcessStatus, error)
	// Process reports a process session's status, including its exit status.
	Process(ctx context.Context, id string) (ProcessStatus, error)
	// WriteStdin writes data to the process's stdin once per writeID: a repeated
	// writeID is acknowledged as a duplicate and not written again. Writing to a
	// process that has exited fails with ErrProcessExited, writing after
	// CloseStdin with ErrStdinClosed.
	WriteStdin(ctx context.Context, id, writeID string, data []byte) (WriteResult, error)
	// CloseStdin closes the process's stdin; closing twice is not an error.
	CloseStdin(ctx context.Context, id string) error
	// ReadOutput streams the process's output lines with offset > after. With
	// follow it waits for new lines until the process has exited and all its
	// output was sent; without follow it stops when caught up.
	ReadOutput(ctx context.Context, id string, after int64, follow bool) (OutputStream, error)
	// CommitOutput says the platform has durably recorded every line through
	// offset: the box may free them. Reading from before that offset then fails
	// with ErrOutputReleased.
	CommitOutput(ctx context.Context, id string, through int64) error
	// Signal sends a signal ("SIGINT", "SIGTERM", "SIGKILL", ...) to the process,
	// or to its whole process group when group is true.
	Signal(ctx context.Context, id, signal string, group bool) error
	// Wait blocks until the process has exited and returns its status.
	Wait(ctx context.Context, id string) (ProcessStatus, error)

	// Exec runs a short command to completion and returns its output.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)

	// ReadFile returns a file's content. Paths are as the box sees them.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// ReadFileFrom returns a file's bytes from offset on and its size: a caller
	// following an append-only file reads what it gained. A size below offset means
	// the file was replaced by a shorter one.
	ReadFileFrom(ctx context.Context, path string, offset int64) (data []byte, size int64, err error)
	// WriteFile creates or replaces a file with the given mode, creating parents.
	WriteFile(ctx context.Context, path string, data []byte, mode uint32) error
	// ListDir lists a directory's entries.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)

	// WorkspaceFiles serves the Session workspace's files API; Terminals its web
	// terminal.
	WorkspaceFiles
	Terminals

	// DialPort opens a TCP connection to a port the box listens on (its own
	// loopback), from the worker's side.
	DialPort(ctx context.Context, port int) (net.Conn, error)
	// WaitPort returns once the port accepts connections or ctx ends.
	WaitPort(ctx context.Context, port int) error

	// Close drops this handle's connections; the box keeps running.
	Close() error
}

// OutputStream yields output lines in offset order.
type OutputStream interface {
	// Next returns the next line, or io.EOF once the stream is complete.
	Next() (OutputLine, error)
	// Close ends the stream early.
	Close() error
}

// State is a box's lifecycle state. The names are OpenSandbox's.
type State string

// Box states, a subset of OpenSandbox's SandboxStatus.state.
const (
	StatePending    State = "Pending"
	StateRunning    State = "Running"
	StatePaused     State = "Paused"
	StateTerminated State = "Terminated"
	StateFailed     State = "Failed"
)

// Info describes one box.
type Info struct {
	ID         string            `json:"id"`
	State      State             `json:"state"`
	CreatedAt  time.Time         `json:"created_at"`
	ProfileKey string            `json:"profile_key,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// BootID is the generation of the box's control service: it changes only
	// when a new control service starts, so output offsets are relative to it.
	BootID string `json:"boot_id,omitempty"`
	// UID is the box's own account on the host, when the backend has one.
	UID int `json:"uid,omitempty"`
	// Death is set once the box is lost.
	Death *Death `json:"death,omitempty"`
}

// Death says why a box was lost.
type Death struct {
	BoxID string `json:"box_id"`
	// Reason is a stable word: "runner_exited", "program_exited", "killed", "expired", "released",
	// "destroyed", "vanished".
	Reason string `json:"reason"`
	// Message gives details for people (exit codes, signals).
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// Errors a caller checks with errors.Is.
var (
	ErrNotFound      = errors.New("sandbox: box not found")
	ErrNoWarmBox     = errors.New("sandbox: no prewarmed box ready")
	ErrBoxLost       = errors.New("sandbox: box lost")
	ErrProcessExited = errors.New("sandbox: process has exited")
	ErrStdinClosed   = errors.New("sandbox: process stdin is closed")
	ErrNoProcess     = errors.New("sandbox: no such process")
	ErrInvalidSpec   = errors.New("sandbox: invalid spec")
	// ErrNotReady: a resident service exited or did not listen on its ready port
	// in time, so the box never reported ready (the image cannot serve). Backends
	// return it as a *NotReadyError.
	ErrNotReady       = errors.New("sandbox: resident service not ready")
	ErrNotSupported   = errors.New("sandbox: not supported by this backend")
	ErrJournalFailing = errors.New("sandbox: output journal cannot be written")
	ErrOutputReleased = errors.New("sandbox: output before this offset was released")
)

// NotReadyError says which resident service kept a box from reporting ready, and why.
type NotReadyError struct {
	Service string
	Port    int
	// Reason is what happened, with the service's exit status and last output.
	Reason string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("resident service %q not ready on port %d: %s", e.Service, e.Port, e.Reason)
}

// Is makes errors.Is(err, ErrNotReady) hold.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }
