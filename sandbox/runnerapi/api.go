// Package runnerapi is the wire protocol between the platform and the in-box
// runner (cmd/astrabox-runner): HTTP/1.1 with JSON bodies over a unix socket, plus
// one streaming endpoint whose frames use the same record format as the runner's
// on-disk output journal, so replay is a plain copy of journal bytes. It also
// holds the runner's boot configuration and a Client.
package runnerapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Paths inside every box. The control folder is a host directory bound
// read-write; the egress folder is bound read-only (the folder, not the socket
// files, so a restarted host side is picked up).
const (
	// ControlDir holds the runner's socket, boot config, journals and death note.
	ControlDir = "/run/astrabox"
	// SocketName is the runner's unix socket inside ControlDir.
	SocketName = "runner.sock"
	// ConfigName is the boot configuration the host writes into ControlDir.
	ConfigName = "runner.json"
	// DeathName is the note the runner leaves when a process with EndsBox ends it.
	DeathName = "death.json"
	// EgressDir is where the host's egress sockets appear (<name>.sock).
	EgressDir = "/run/egress"
)

// Config is the runner's boot configuration (runner.json).
type Config struct {
	// StateDir holds journals and notes (default ControlDir).
	StateDir string `json:"state_dir"`
	// Socket is the unix socket to serve on.
	Socket string `json:"socket"`
	// Workspace is the default working directory of processes.
	Workspace string `json:"workspace"`
	// Env is the box environment given to every process.
	Env map[string]string `json:"env,omitempty"`
	// Forwards are loopback listeners bound before anything starts.
	Forwards []Forward `json:"forwards,omitempty"`
	// Tunnels are loopback listeners, also bound before anything starts, whose
	// connections go to the worker through the egress tunnel (remote backends;
	// see TunnelPath).
	Tunnels []Tunnel `json:"tunnels,omitempty"`
	// TunnelForwards is the raw EnvForwards value the tunnels come from, handed
	// back to a worker that takes the box over.
	TunnelForwards string `json:"tunnel_forwards,omitempty"`
	// ListenTCP, when set, also serves the API on a TCP address, for backends
	// whose boxes are reached over the network (an OpenSandbox endpoint).
	// Token is then required on every request.
	ListenTCP string `json:"listen_tcp,omitempty"`
	// Token, when set, must come in the TokenHeader of every request.
	Token string `json:"token,omitempty"`
	// ProgramUID and ProgramGID, when positive, are the account every process,
	// command and file operation runs as, while the runner keeps an account of
	// its own: the programs then cannot reach the runner's socket and journals,
	// nor signal or trace the runner. Zero runs everything as the runner.
	ProgramUID int `json:"program_uid,omitempty"`
	ProgramGID int `json:"program_gid,omitempty"`
}

// FileSizeHeader carries a read file's size in bytes when it was opened, beside the
// bytes from the offset asked for.
const FileSizeHeader = "X-Astrabox-File-Size"

// TokenHeader carries Config.Token. A client made by NewHTTPClient sends the
// token as a bearer Authorization header as well, which the runner also takes.
const TokenHeader = "X-Astrabox-Runner-Token"

// Headers of the workspace files API.
const (
	// FileInfoHeader carries a downloaded file's sandbox.FileInfo as JSON.
	FileInfoHeader = "X-Astrabox-File"
	// ErrorTrailer, when set in an archive's trailer, says the archive is cut.
	ErrorTrailer = "X-Astrabox-Error"
	// UploadPathHeader and UploadModeHeader name each upload part's workspace
	// path and octal mode.
	UploadPathHeader = "X-Astrabox-Path"
	UploadModeHeader = "X-Astrabox-Mode"
	// UploadAbandonHeader marks the part that ends an upload whose sender
	// failed; its value says why. The runner removes what it staged before it
	// answers, so the sender's error reaches its caller only once the
	// workspace holds none of the upload.
	UploadAbandonHeader = "X-Astrabox-Abandon"
)

// ResizeRequest sets a terminal's window size.
type ResizeRequest struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// InterruptResult says whether a terminal's interrupt reached a foreground job.
type InterruptResult struct {
	Interrupted bool `json:"interrupted"`
}

// Forward makes the runner listen on Listen (host:port on the box loopback) and
// relay each connection to the unix socket Socket.
type Forward struct {
	Listen string `json:"listen"`
	Socket string `json:"socket"`
}

// Tunnel makes the runner listen on Listen (host:port on the box loopback) and
// hand each connection to the egress tunnel as a stream named Name.
type Tunnel struct {
	Name   string `json:"name"`
	Listen string `json:"listen"`
}

// Info describes the running runner.
type Info struct {
	// BootID is the runner's generation: a new id every time a runner starts.
	BootID    string    `json:"boot_id"`
	StartedAt time.Time `json:"started_at"`
	PID       int       `json:"pid"`
	UID       int       `json:"uid"`
	// Build names the runner binary's build (internal/buildinfo).
	Build string `json:"build,omitempty"`
}

// Death is the note a runner leaves before it ends its box.
type Death struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// ErrorBody is every error response: a stable code and a message.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes and the sentinels they map to.
const (
	CodeNotFound       = "NOT_FOUND"
	CodeProcessExited  = "PROCESS_EXITED"
	CodeStdinClosed    = "STDIN_CLOSED"
	CodeInvalid        = "INVALID_REQUEST"
	CodeJournalFailing = "JOURNAL_FAILING"
	CodeOutputReleased = "OUTPUT_RELEASED"
	CodeInternal       = "RUNTIME_ERROR"
	CodeInvalidPath    = "INVALID_PATH"
	CodeNoFile         = "FILE_NOT_FOUND"
	CodeIsFolder       = "IS_FOLDER"
	CodeNotFolder      = "NOT_FOLDER"
)

// CodeFor maps an error to its wire code.
func CodeFor(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrInvalidPath):
		return CodeInvalidPath
	case errors.Is(err, sandbox.ErrNoFile):
		return CodeNoFile
	case errors.Is(err, sandbox.ErrIsFolder):
		return CodeIsFolder
	case errors.Is(err, sandbox.ErrNotFolder):
		return CodeNotFolder
	case errors.Is(err, sandbox.ErrNoProcess), errors.Is(err, sandbox.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, sandbox.ErrProcessExited):
		return CodeProcessExited
	case errors.Is(err, sandbox.ErrStdinClosed):
		return CodeStdinClosed
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return CodeInvalid
	case errors.Is(err, sandbox.ErrJournalFailing):
		return CodeJournalFailing
	case errors.Is(err, sandbox.ErrOutputReleased):
		return CodeOutputReleased
	}
	return CodeInternal
}

// SentinelFor maps a wire code back to the sentinel errors.Is checks against.
func SentinelFor(code string) error {
	switch code {
	case CodeInvalidPath:
		return sandbox.ErrInvalidPath
	case CodeNoFile:
		return sandbox.ErrNoFile
	case CodeIsFolder:
		return sandbox.ErrIsFolder
	case CodeNotFolder:
		return sandbox.ErrNotFolder
	case CodeNotFound:
		return sandbox.ErrNoProcess
	case CodeProcessExited:
		return sandbox.ErrProcessExited
	case CodeStdinClosed:
		return sandbox.ErrStdinClosed
	case CodeInvalid:
		return sandbox.ErrInvalidSpec
	case CodeJournalFailing:
		return sandbox.ErrJournalFailing
	case CodeOutputReleased:
		return sandbox.ErrOutputReleased
	}
	return nil
}

// Frame kinds of the output stream and the journal.
const (
	frameLine = 'L'
	frameEnd  = 'E'
)

// End reasons carried by the final frame of an output stream.
const (
	EndExited   = "exited"    // the process exited and every line was sent
	EndCaughtUp = "caught_up" // no follow: every line journaled so far was sent
)

// AppendRecord appends the journal record of one line to buf:
// "L <offset> <o|e> <len>\n<data>\n".
func AppendRecord(buf []byte, offset int64, stream sandbox.Stream, data []byte) []byte {
	s := byte('o')
	if stream == sandbox.Stderr {
		s = 'e'
	}
	buf = append(buf, frameLine, ' ')
	buf = strconv.AppendInt(buf, offset, 10)
	buf = append(buf, ' ', s, ' ')
	buf = strconv.AppendInt(buf, int64(len(data)), 10)
	buf = append(buf, '\n')
	buf = append(buf, data...)
	return append(buf, '\n')
}

// AppendEnd appends the final frame of an output stream.
func AppendEnd(buf []byte, reason string) []byte {
	buf = append(buf, frameEnd, ' ')
	buf = append(buf, reason...)
	return append(buf, '\n')
}

// MaxLine bounds one record's data; longer lines are split by the runner.
const MaxLine = 8 << 20

// Decoder reads journal records and stream frames.
type Decoder struct {
	r *bufio.Reader
	// End is the reason of the end frame once Next returned io.EOF after one.
	End string
}

// decoderBuffer sizes a Decoder's buffer. It holds frame headers (a few dozen bytes)
// and end frames (a reason word); a frame's data is read in full past it, straight
// into the line when the buffer is empty. Every live Session's reader keeps one while
// idle, over the HTTP connection's own buffer, so it stays small.
const decoderBuffer = 512

// NewDecoder reads frames from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, decoderBuffer)}
}

// Next returns the next line. It returns io.EOF after an end frame or at a clean
// end of input, and io.ErrUnexpectedEOF for a torn record.
func (d *Decoder) Next() (sandbox.OutputLine, error) {
	header, err := d.r.ReadSlice('\n')
	if err != nil {
		if err == io.EOF && len(header) == 0 {
			return sandbox.OutputLine{}, io.EOF
		}
		if err == io.EOF {
			return sandbox.OutputLine{}, io.ErrUnexpectedEOF
		}
		return sandbox.OutputLine{}, fmt.Errorf("read frame header: %w", err)
	}
	header = header[:len(header)-1]
	if len(header) >= 2 && header[0] == frameEnd {
		d.End = string(header[2:])
		return sandbox.OutputLine{}, io.EOF
	}
	fields := bytes.Fields(header)
	if len(fields) != 4 || len(fields[0]) != 1 || fields[0][0] != frameLine || len(fields[2]) != 1 {
		return sandbox.OutputLine{}, fmt.Errorf("bad frame header %q", header)
	}
	offset, err1 := strconv.ParseInt(string(fields[1]), 10, 64)
	size, err2 := strconv.ParseInt(string(fields[3]), 10, 64)
	if err1 != nil || err2 != nil || size < 0 || size > MaxLine {
		return sandbox.OutputLine{}, fmt.Errorf("bad frame header %q", header)
	}
	line := sandbox.OutputLine{Offset: offset, Stream: sandbox.Stdout, Data: make([]byte, size+1)}
	if fields[2][0] == 'e' {
		line.Stream = sandbox.Stderr
	}
	if _, err := io.ReadFull(d.r, line.Data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return sandbox.OutputLine{}, fmt.Errorf("read frame data: %w", err)
	}
	if line.Data[size] != '\n' {
		return sandbox.OutputLine{}, fmt.Errorf("frame %d not terminated", offset)
	}
	line.Data = line.Data[:size]
	return line, nil
}

// The runner's network mode: in an image run by a remote backend (OpenSandbox,
// Kubernetes) the runner is the image's entry point, `astrabox-runner serve
// -listen :DefaultPort`, and takes its per-box settings from the environment the
// backend gives the box at create. It removes every ASTRABOX_RUNNER_* variable
// before anything starts, so no process it runs inherits the token; with a
// separate program account the programs cannot read the runner's own
// /proc/<pid>/environ either.
const (
	// DefaultPort is the runner's TCP control port in images.
	DefaultPort = 9494
	// EnvPrefix starts every variable meant for the runner alone.
	EnvPrefix = "ASTRABOX_RUNNER_"
	// EnvToken is the per-box bearer token every request must carry.
	EnvToken = EnvPrefix + "TOKEN"
	// EnvWorkspace is the processes' default working directory.
	EnvWorkspace = EnvPrefix + "WORKSPACE"
	// EnvStateDir holds the runner's socket, journals and notes.
	EnvStateDir = EnvPrefix + "STATE_DIR"
	// EnvProgramUID and EnvProgramGID name the program account (decimal ids).
	EnvProgramUID = EnvPrefix + "PROGRAM_UID"
	EnvProgramGID = EnvPrefix + "PROGRAM_GID"
)
