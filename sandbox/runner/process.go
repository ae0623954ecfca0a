package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/procwait"
	"github.com/astrabox/astrabox/sandbox"
)

// process is one long-lived process session: the program, its pipes, its
// journal and its stdin write log.
type process struct {
	spec    sandbox.ProcessSpec
	cmd     *exec.Cmd
	started time.Time
	journal *journal

	stdinMu sync.Mutex
	stdin   *os.File // nil once closed
	writes  map[string]bool

	mu      sync.Mutex
	exit    *sandbox.ExitStatus
	exited  chan struct{}
	readers sync.WaitGroup
}

// startProcess launches spec with its standard streams on stdioPairs; stdout and
// stderr lines go to a journal in dir.
func startProcess(spec sandbox.ProcessSpec, dir string, env []string, workspace string, acct account,
	retry time.Duration) (*process, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create process dir: %w", err)
	}
	j, err := openJournal(filepath.Join(dir, "journal"))
	if err != nil {
		return nil, err
	}
	stdinW, stdinR, err := stdioPair()
	if err != nil {
		j.close()
		return nil, fmt.Errorf("stdin: %w", err)
	}
	outR, outW, err := stdioPair()
	if err != nil {
		j.close()
		return nil, fmt.Errorf("stdout: %w", err)
	}
	errR, errW, err := stdioPair()
	if err != nil {
		j.close()
		return nil, fmt.Errorf("stderr: %w", err)
	}
	var cmd *exec.Cmd
	var pidfd *int
	// The program's path is looked up and started as the program account: it
	// may live in the workspace, which only that account can enter.
	err = acct.do(func() error {
		cmd = inEnvPath(exec.Command(spec.Argv[0], spec.Argv[1:]...), spec.Argv[0], env)
		cmd.Dir = spec.Dir
		if cmd.Dir == "" {
			cmd.Dir = workspace
		}
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
		cmd.SysProcAttr = acct.sysProcAttr()
		pidfd = procwait.OnStart(cmd, procwait.Supported())
		if err := cmd.Start(); err != nil {
			return err
		}
		// Under the box's memory limit the kernel should pick a program, not the
		// runner that reports its death. Raising a score needs no privilege, only
		// write access to the child's file, which belongs to the program account.
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid), []byte("500"), 0)
		return nil
	})
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		j.close()
		return nil, fmt.Errorf("start %q: %w", spec.Argv[0], err)
	}
	p := &process{spec: spec, cmd: cmd, started: time.Now().UTC(), journal: j,
		stdin: stdinW, writes: map[string]bool{}, exited: make(chan struct{})}
	p.readers.Add(2)
	go p.pump(outR, sandbox.Stdout, retry)
	go p.pump(errR, sandbox.Stderr, retry)
	go p.wait(*pidfd)
	return p, nil
}

// pump journals every line of one output stream. When the journal cannot be written it
// retries the same line and stops reading meanwhile, so the program blocks on a
// full pipe instead of losing output.
func (p *process) pump(r *os.File, stream sandbox.Stream, retry time.Duration) {
	defer p.readers.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		full := len(line) > 0 && line[len(line)-1] == '\n'
		eof := err != nil && !errors.Is(err, bufio.ErrBufferFull)
		if full || (eof && len(line) > 0) || len(line) >= maxLine {
			data := line
			if full {
				data = line[:len(line)-1]
			}
			for p.journal.append(stream, data) != nil {
				time.Sleep(retry) // a full disk: hold the program back, then retry
			}
			line = line[:0]
		}
		if eof {
			return
		}
	}
}

// wait reaps the program once it exits (on the poller where the kernel gives a
// pidfd) and reports its exit once its output is journaled.
func (p *process) wait(pidfd int) {
	procwait.Exited(pidfd)
	err := p.cmd.Wait()
	st := &sandbox.ExitStatus{Code: p.cmd.ProcessState.ExitCode(), ExitedAt: time.Now().UTC()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Code = 128 + int(ws.Signal())
		st.Signal = signalName(ws.Signal())
	} else if err != nil && st.Code < 0 {
		st.Code = 255
	}
	// The pipes may still hold output. The exit is reported once it is journaled,
	// so a caller that waited for the exit reads every line; a background child
	// that keeps the pipes open must not hold the exit back forever, though, so
	// the wait for the drain is bounded.
	drained := make(chan struct{})
	go func() {
		p.readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(exitDrainGrace):
	}
	p.mu.Lock()
	p.exit = st
	p.mu.Unlock()
	close(p.exited)
	<-drained
	p.journal.finish()
	p.closeStdin()
}

// exitDrainGrace bounds how long an exit waits for the program's remaining
// output to be journaled before it is reported.
const exitDrainGrace = 5 * time.Second

func (p *process) status() sandbox.ProcessStatus {
	p.mu.Lock()
	exit := p.exit
	p.mu.Unlock()
	js := p.journal.state()
	st := sandbox.ProcessStatus{ID: p.spec.ID, Argv: p.spec.Argv, PID: p.cmd.Process.Pid,
		Running: exit == nil, StartedAt: p.started, Exit: exit, LastOffset: js.last, CommittedOffset: js.released}
	if js.err != nil {
		st.JournalError = js.err.Error()
	}
	return st
}

// write delivers data to stdin once per write id.
func (p *process) write(writeID string, data []byte) (sandbox.WriteResult, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if writeID != "" && p.writes[writeID] {
		return sandbox.WriteResult{Duplicate: true}, nil
	}
	select {
	case <-p.exited:
		return sandbox.WriteResult{}, fmt.Errorf("write to %q: %w", p.spec.ID, sandbox.ErrProcessExited)
	default:
	}
	if p.stdin == nil {
		return sandbox.WriteResult{}, fmt.Errorf("write to %q: %w", p.spec.ID, sandbox.ErrStdinClosed)
	}
	// A program that stops reading blocks the write (and later writes) until it
	// reads or exits: cutting a write short would hand it half a message.
	if _, err := p.stdin.Write(data); err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) {
			return sandbox.WriteResult{}, fmt.Errorf("write to %q: %w: %v", p.spec.ID, sandbox.ErrProcessExited, err)
		}
		return sandbox.WriteResult{}, fmt.Errorf("write to %q: %w", p.spec.ID, err)
	}
	if writeID != "" {
		p.writes[writeID] = true
	}
	return sandbox.WriteResult{}, nil
}

func (p *process) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

func (p *process) signal(sig syscall.Signal, group bool) error {
	select {
	case <-p.exited:
		return fmt.Errorf("signal %q: %w", p.spec.ID, sandbox.ErrProcessExited)
	default:
	}
	var err error
	if group {
		// A group's id stays taken while any of its members lives, so it names no
		// stranger even after the leader was reaped.
		err = syscall.Kill(-p.cmd.Process.Pid, sig)
	} else {
		// Through the process's own handle (a pidfd): once reaped, its number may
		// belong to another process, which a kill by number would hit.
		err = p.cmd.Process.Signal(sig)
	}
	switch {
	case errors.Is(err, os.ErrProcessDone):
		return fmt.Errorf("signal %q: %w", p.spec.ID, sandbox.ErrProcessExited)
	case err != nil:
		return fmt.Errorf("signal %q: %w", p.spec.ID, err)
	}
	return nil
}

var signals = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
	"SIGWINCH": syscall.SIGWINCH,
}

func parseSignal(name string) (syscall.Signal, error) {
	if s, ok := signals[name]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("%w: unknown signal %q", sandbox.ErrInvalidSpec, name)
}

func signalName(s syscall.Signal) string {
	for name, v := range signals {
		if v == s {
			return name
		}
	}
	return s.String()
}

// envList merges maps into KEY=VALUE form, later maps winning, sorted for
// stable output.
func envList(maps ...map[string]string) []string {
	merged := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			merged[k] = v
		}
	}
	out := make([]string, 0, len(merged))
	for k, v := range merged {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// stdioPair returns the runner's end and the program's end of one standard stream.
// They are a unix socket pair rather than a pipe: any process of the program's account
// (the program's own tools) can open a pipe again through /proc/<pid>/fd/N and write
// the program's stdin (forging answers the program believes came from the platform)
// or its stdout (forging output the journal records), while opening a socket that way
// fails (ENXIO).
//
// The runner's end is non-blocking, so its reads and writes park on Go's poller: a
// blocking descriptor holds an OS thread in read(2) for as long as the program is
// quiet, and threads in syscalls keep the runtime's monitor polling every 20
// microseconds (with a box per Session, the runners' monitors were a twentieth of the
// machine's CPU; docs/performance.md). The program's end stays blocking, as programs
// expect of their standard streams; the flag belongs to each end alone.
func stdioPair() (runnerEnd, programEnd *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("socketpair non-blocking: %w", err)
	}
	// os.NewFile puts a descriptor that is already non-blocking on the poller.
	return os.NewFile(uintptr(fds[0]), "stdio-runner"), os.NewFile(uintptr(fds[1]), "stdio-program"), nil
}
