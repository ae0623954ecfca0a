package sandbox

import (
	"fmt"
	"time"
)

// ProcessSpec starts a long-lived process session in a box.
type ProcessSpec struct {
	// ID is chosen by the caller so that a retried start is recognised.
	ID string `json:"id"`
	// Argv is the program and its arguments (no shell).
	Argv []string `json:"argv"`
	// Dir is the working directory (default: the workspace).
	Dir string `json:"dir,omitempty"`
	// Env is added to the box environment for this process.
	Env map[string]string `json:"env,omitempty"`
	// EndsBox makes the box end when this process exits: the box is then
	// reported lost with reason "program_exited". Use it for the Agent program
	// when a dead program means a dead conversation runtime.
	EndsBox bool `json:"ends_box,omitempty"`
}

// Validate checks the spec before it is sent anywhere.
func (p ProcessSpec) Validate() error {
	if !ValidName(p.ID) {
		return fmt.Errorf("%w: process id %q", ErrInvalidSpec, p.ID)
	}
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return fmt.Errorf("%w: process %q has no program", ErrInvalidSpec, p.ID)
	}
	return nil
}

// ProcessStatus describes a process session.
type ProcessStatus struct {
	ID        string    `json:"id"`
	Argv      []string  `json:"argv"`
	PID       int       `json:"pid"`
	Running   bool      `json:"running"`
	StartedAt time.Time `json:"started_at"`
	// Exit is set once the process has exited.
	Exit *ExitStatus `json:"exit,omitempty"`
	// LastOffset is the offset of the newest journaled output line.
	LastOffset int64 `json:"last_offset"`
	// CommittedOffset is the newest offset released by CommitOutput.
	CommittedOffset int64 `json:"committed_offset,omitempty"`
	// JournalError is set while output cannot be written to the journal (for
	// example a full disk); output is held back, not dropped, until it clears.
	JournalError string `json:"journal_error,omitempty"`
	// Existed is true when StartProcess found the id already started.
	Existed bool `json:"existed,omitempty"`
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or 128+signal when killed by a signal.
	Code int `json:"code"`
	// Signal names the signal that killed the process, if any.
	Signal   string    `json:"signal,omitempty"`
	ExitedAt time.Time `json:"exited_at"`
}

// Stream names the pipe a line came from.
type Stream string

// Output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// OutputLine is one journaled line of a process's output, without its newline.
// Offsets count lines of both streams together, from 1, per process session of
// one control-service boot.
type OutputLine struct {
	Offset int64  `json:"offset"`
	Stream Stream `json:"stream"`
	Data   []byte `json:"data"`
}

// WriteResult acknowledges a stdin write.
type WriteResult struct {
	// Duplicate is true when the write id was seen before and nothing was written.
	Duplicate bool `json:"duplicate"`
}

// ExecRequest runs a short command to completion.
type ExecRequest struct {
	Argv  []string          `json:"argv"`
	Dir   string            `json:"dir,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Stdin []byte            `json:"stdin,omitempty"`
	// Timeout kills the command when exceeded (default one minute).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// ExecResult is a finished command.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   []byte `json:"stdout"`
	Stderr   []byte `json:"stderr"`
	// TimedOut is true when the command was killed for exceeding its timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// Truncated is true when output beyond the backend's cap was dropped.
	Truncated bool `json:"truncated,omitempty"`
}

// FileInfo describes a directory entry, as execd's FileInfo does.
type FileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, directory, symlink, other
	Size       int64     `json:"size"`
	Mode       uint32    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
}
