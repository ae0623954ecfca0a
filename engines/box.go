package engines

import (
	"bytes"
	"context"
	"iter"
	"net"
)

// Box is the part of a platform-prepared sandbox that ActivateRuntime and its runtime
// client may use. It is deliberately small: the sandbox layer satisfies it with an
// adapter over its backend handle, so this package does not depend on the sandbox
// package, and an engine cannot make lifecycle decisions (claim, create, replace,
// release) that belong to the platform.
//
// Paths are runtime-visible paths (the ones in RuntimeIdentity). The box maps workspace
// paths to their backing location itself; adapters never convert them.
type Box interface {
	// ID is the sandbox id.
	ID() string

	// StartProcess starts a long-lived process session, or attaches to the one already
	// running under spec.Name (attach is how a new reader reconnects after a worker
	// restart). The process outlives the caller's connection.
	StartProcess(ctx context.Context, spec ProcessSpec) (ProcessSession, error)

	// ReadFile reads a file. identity nil addresses the box filesystem; otherwise the
	// read happens as that runtime identity.
	ReadFile(ctx context.Context, identity *RuntimeIdentity, path string) ([]byte, error)

	// WriteFile writes a file atomically with the given permission bits, as identity
	// (nil addresses the box filesystem).
	WriteFile(ctx context.Context, identity *RuntimeIdentity, path string, data []byte, perm uint32) error

	// DialPort opens a stream connection to a published in-box port, for programs
	// reached over HTTP, WebSocket or RPC.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// FileTailReader is a Box that reads a file from a byte offset on, returning the
// bytes from there and the file's size (below offset: the file was replaced by a
// shorter one). A reader of a growing native log reads what it gained, not the whole
// log at every look.
type FileTailReader interface {
	ReadFileFrom(ctx context.Context, identity *RuntimeIdentity, path string, offset int64) (data []byte, size int64, err error)
}

// ReadFileFrom reads path from offset on through box, and the file's size: with a
// FileTailReader only those bytes travel; another Box reads the whole file.
func ReadFileFrom(ctx context.Context, box Box, identity *RuntimeIdentity, path string, offset int64) ([]byte, int64, error) {
	if r, ok := box.(FileTailReader); ok {
		return r.ReadFileFrom(ctx, identity, path, offset)
	}
	data, err := box.ReadFile(ctx, identity, path)
	if err != nil {
		return nil, 0, err
	}
	size := int64(len(data))
	return data[min(offset, size):], size, nil
}

// ReadNewLines reads the complete lines an append-only file gained past offset (the
// end of the last complete line read before) and the offset after them. A line still
// being written is left for the next read; an unreadable file, or one shorter than
// offset (replaced), gives no lines and offset back.
func ReadNewLines(ctx context.Context, box Box, identity *RuntimeIdentity, path string, offset int64) ([][]byte, int64) {
	data, size, err := ReadFileFrom(ctx, box, identity, path, offset)
	if err != nil || size < offset {
		return nil, offset
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil, offset
	}
	return bytes.Split(data[:end], []byte{'\n'}), offset + int64(end) + 1
}

// ProcessSpec describes a long-lived process session.
type ProcessSpec struct {
	// Name identifies the session within the box; starting an existing name attaches.
	Name string `json:"name"`
	// Command is the argv.
	Command []string `json:"command"`
	// Env holds environment values added to the runtime identity's environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory; empty means the identity's workspace.
	Dir string `json:"dir,omitempty"`
	// Identity is the account to run as; nil runs as the box account.
	Identity *RuntimeIdentity `json:"identity,omitempty"`
}

// ProcessSession is a long-lived process in the box driven over stdin and stdout. The
// box journals its output with offsets so a reader can replay after reconnecting.
type ProcessSession interface {
	// Name is the ProcessSpec.Name the session was started under.
	Name() string

	// WriteStdin writes data to the process's stdin once per writeID: a repeated write
	// with the same id (for example after a lost reply) is acknowledged without writing
	// again. Use the input id, or a value derived from it, as writeID.
	WriteStdin(ctx context.Context, writeID string, data []byte) error

	// ReadOutput yields the journalled output lines whose Offset is at least offset (0
	// for the start), in journal order. It replays what is already journalled and then,
	// with follow, waits for new lines until ctx ends or the process exits; without
	// follow it stops at the current end. Offsets only grow, so passing a line's
	// Offset+1 resumes after that line whether the box counts lines or bytes.
	ReadOutput(ctx context.Context, offset int64, follow bool) iter.Seq2[OutputLine, error]

	// Signal sends a signal by name ("INT", "TERM", "KILL") to the process.
	Signal(ctx context.Context, signal string) error

	// ExitStatus returns the exit status, or nil while the process runs.
	ExitStatus(ctx context.Context) (*ExitStatus, error)
}

// OutputStream names the stream an output line came from.
type OutputStream string

// The output streams.
const (
	Stdout OutputStream = "stdout"
	Stderr OutputStream = "stderr"
)

// OutputLine is one journalled line of process output.
type OutputLine struct {
	// Offset is the line's position in the journal (increasing; line or byte based, as
	// the box chooses); ReadOutput(ctx, Offset+1, ...) resumes after this line.
	Offset int64 `json:"offset"`
	// Stream is stdout or stderr.
	Stream OutputStream `json:"stream"`
	// Data is the line without its trailing newline.
	Data []byte `json:"data"`
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when a signal ended the process.
	Code int `json:"code"`
	// Signal names the terminating signal, if any.
	Signal string `json:"signal,omitempty"`
}
