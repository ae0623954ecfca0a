package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"sync"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// defaultScrollback bounds a terminal's replayable output when the spec does not.
const defaultScrollback = 1 << 20

// terminal is an interactive shell on a pseudo-terminal. Its output is kept in
// memory in a bounded scrollback addressed by byte offsets that count from the
// first start of the terminal id, so any number of readers follow it and a
// reader that reconnects replays from the offset it had. Unlike a process
// session's journal, a terminal's output is not durable: it is a view for
// people, and a restarted runner starts a new shell.
type terminal struct {
	spec sandbox.TerminalSpec

	mu      sync.Mutex
	cmd     *exec.Cmd
	ptmx    *os.File
	started time.Time
	exit    *sandbox.ExitStatus
	// buf holds the newest output; its first byte is at offset end-len(buf).
	buf     []byte
	end     int64
	changed chan struct{} // closed and replaced on new output or exit
	exited  chan struct{}
}

// startTerminal starts spec's shell as the program account in its own session,
// with the pseudo-terminal as its controlling terminal. prev, when set, is the
// exited terminal of the same id whose offsets the new one continues.
func startTerminal(spec sandbox.TerminalSpec, prev *terminal, env []string, workspace string, acct account) (*terminal, error) {
	argv := spec.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-i"}
		if _, err := os.Stat("/bin/bash"); err == nil {
			argv = []string{"/bin/bash", "-i"}
		}
	}
	if spec.Scrollback == 0 {
		spec.Scrollback = defaultScrollback
	}
	size := &pty.Winsize{Cols: uint16(orDefault(spec.Cols, 80)), Rows: uint16(orDefault(spec.Rows, 24))}
	t := &terminal{spec: spec, changed: make(chan struct{}), exited: make(chan struct{})}
	if prev != nil {
		prev.mu.Lock()
		t.end, t.buf = prev.end, append([]byte(nil), prev.buf...)
		prev.mu.Unlock()
	}
	// Opening the pseudo-terminal with the program's file-system identity makes
	// its device the program's, as a terminal's device is its user's.
	err := acct.do(func() error {
		cmd := inEnvPath(exec.Command(argv[0], argv[1:]...), argv[0], env)
		cmd.Dir = workspace
		cmd.Env = append(env, "TERM=xterm-256color")
		attr := &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if acct.separate() {
			attr.Credential = &syscall.Credential{Uid: uint32(acct.uid), Gid: uint32(acct.gid)}
		}
		ptmx, err := pty.StartWithAttrs(cmd, size, attr)
		if err != nil {
			return err
		}
		t.cmd = cmd
		t.ptmx, err = pollable(ptmx)
		return err
	})
	if err != nil {
		if t.cmd != nil && t.cmd.Process != nil {
			_ = t.cmd.Process.Kill()
			_ = t.cmd.Wait()
		}
		return nil, fmt.Errorf("start terminal %q: %w", spec.ID, err)
	}
	t.started = time.Now().UTC()
	pumped := make(chan struct{})
	go t.pump(pumped)
	go t.wait(pumped)
	return t, nil
}

// pollable returns the pseudo-terminal's controller as a non-blocking file the
// runtime polls. The pty package leaves it in blocking mode, where a read holds
// a thread and Close cannot end it; a shell that exits while a background job
// keeps the terminal open would then never let the terminal end.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("dup terminal: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("terminal non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// pumpDrain bounds how long an exited shell's last output may take to arrive
// before the terminal is closed under any background job still holding it.
const pumpDrain = time.Second

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// pump copies the shell's output into the scrollback until the terminal closes
// (EIO once every process holding it has gone, or closed by wait).
func (t *terminal) pump(done chan<- struct{}) {
	defer close(done)
	chunk := make([]byte, 32<<10)
	for {
		n, err := t.ptmx.Read(chunk)
		if n > 0 {
			t.mu.Lock()
			t.buf = append(t.buf, chunk[:n]...)
			if over := len(t.buf) - t.spec.Scrollback; over > 0 {
				t.buf = append(t.buf[:0], t.buf[over:]...)
			}
			t.end += int64(n)
			close(t.changed)
			t.changed = make(chan struct{})
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait reaps the shell; the terminal ends with it, once its output is in.
func (t *terminal) wait(pumped <-chan struct{}) {
	_ = t.cmd.Wait()
	drain := time.NewTimer(pumpDrain)
	select {
	case <-pumped:
	case <-drain.C:
	}
	drain.Stop()
	st := &sandbox.ExitStatus{Code: t.cmd.ProcessState.ExitCode(), ExitedAt: time.Now().UTC()}
	if ws, ok := t.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Code, st.Signal = 128+int(ws.Signal()), signalName(ws.Signal())
	}
	t.ptmx.Close()
	t.mu.Lock()
	t.exit = st
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	close(t.exited)
}

func (t *terminal) status() sandbox.TerminalStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sandbox.TerminalStatus{ID: t.spec.ID, PID: t.cmd.Process.Pid, Running: t.exit == nil, Offset: t.end,
		FirstOffset: t.end - int64(len(t.buf)), StartedAt: t.started, Exit: t.exit}
}

func (t *terminal) running() error {
	select {
	case <-t.exited:
		return fmt.Errorf("terminal %q: %w", t.spec.ID, sandbox.ErrProcessExited)
	default:
		return nil
	}
}

func (t *terminal) write(data []byte) error {
	if err := t.running(); err != nil {
		return err
	}
	if _, err := t.ptmx.Write(data); err != nil {
		return fmt.Errorf("write to terminal %q: %w", t.spec.ID, err)
	}
	return nil
}

func (t *terminal) resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > sandbox.MaxTerminalSide || rows > sandbox.MaxTerminalSide {
		return fmt.Errorf("%w: terminal size %dx%d", sandbox.ErrInvalidSpec, cols, rows)
	}
	if err := t.running(); err != nil {
		return err
	}
	if err := pty.Setsize(t.ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fmt.Errorf("resize terminal %q: %w", t.spec.ID, err)
	}
	return nil
}

// interrupt sends SIGINT to the terminal's foreground process group, which the
// shell sets to the job it runs in the foreground; when the shell itself is in
// the foreground (waiting at its prompt) nothing runs and nothing is signalled.
func (t *terminal) interrupt() (bool, error) {
	if err := t.running(); err != nil {
		return false, err
	}
	var pgrp int
	var ioctlErr error
	raw, err := t.ptmx.SyscallConn()
	if err != nil {
		return false, fmt.Errorf("terminal %q: %w", t.spec.ID, err)
	}
	if err := raw.Control(func(fd uintptr) { pgrp, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil {
		return false, fmt.Errorf("terminal %q: %w", t.spec.ID, err)
	}
	if ioctlErr != nil {
		return false, fmt.Errorf("foreground group of terminal %q: %w", t.spec.ID, ioctlErr)
	}
	if pgrp <= 0 || pgrp == t.cmd.Process.Pid {
		return false, nil
	}
	if err := syscall.Kill(-pgrp, syscall.SIGINT); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil // the job ended meanwhile
		}
		return false, fmt.Errorf("interrupt terminal %q: %w", t.spec.ID, err)
	}
	return true, nil
}

// stream writes output after offset to emit, as it comes, until ctx ends or the
// shell has exited and everything was sent. emit gets the chunk and the offset
// just after it.
func (t *terminal) stream(ctx context.Context, after int64, emit func(data []byte, end int64) error) error {
	for {
		t.mu.Lock()
		first := t.end - int64(len(t.buf))
		var chunk []byte
		end := t.end
		if after < end {
			from := max(after, first) - first
			chunk = append([]byte(nil), t.buf[from:]...)
		}
		exited := t.exit != nil
		changed := t.changed
		t.mu.Unlock()
		if len(chunk) > 0 {
			if err := emit(chunk, end); err != nil {
				return err
			}
			after = end
			continue
		}
		if exited {
			return io.EOF
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// close hangs the terminal up: its session gets SIGHUP, as when a terminal
// window closes, and SIGKILL if it is still there after grace.
func (t *terminal) close(grace time.Duration) {
	if t.running() != nil {
		return
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGHUP)
	select {
	case <-t.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.exited
	}
}
