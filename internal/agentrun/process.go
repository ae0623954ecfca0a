// Package agentrun runs an Agent program headless on this machine for tests and
// recordings: it writes JSON lines to the program's stdin and keeps every line
// the program prints, with its offset from the start, so a caller can wait for
// a line that matters without sleeping. The in-box runner does this job in the
// product; this package is the small local version tests drive directly.
package agentrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Directions of a Line.
const (
	// DirIn is a line written to the program's stdin.
	DirIn = "in"
	// DirOut is a line the program printed on stdout.
	DirOut = "out"
	// DirErr is a line the program printed on stderr.
	DirErr = "err"
)

// Line is one line of the program's conversation on stdio.
type Line struct {
	Dir string `json:"dir"`
	// Offset is the time since the program started.
	Offset time.Duration `json:"offset_ns"`
	Text   string        `json:"text"`
}

// Spec says how to start a program.
type Spec struct {
	// Command is the executable and its arguments.
	Command []string
	// Env is the whole environment; nothing is inherited.
	Env []string
	// Dir is the working directory.
	Dir string
}

// Process is a running program.
type Process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	waitErr error

	writeMu sync.Mutex
	stdin   io.WriteCloser

	mu      sync.Mutex
	lines   []Line
	changed chan struct{}
}

// Start starts spec. The program is killed if ctx ends before it exits.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Command) == 0 {
		return nil, errors.New("start agent program: empty command")
	}
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	// A process group lets Kill reach the tools the program started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, done: make(chan struct{}), changed: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go p.read(stdout, DirOut, &readers)
	go p.read(stderr, DirErr, &readers)
	go func() {
		// Wait must follow the readers: it closes the pipes.
		readers.Wait()
		p.waitErr = cmd.Wait()
		close(p.done)
		p.mu.Lock()
		p.notifyLocked()
		p.mu.Unlock()
	}()
	return p, nil
}

func (p *Process) read(r io.Reader, dir string, wg *sync.WaitGroup) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		p.record(dir, sc.Text())
	}
}

func (p *Process) record(dir, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, Line{Dir: dir, Offset: time.Since(p.started), Text: text})
	p.notifyLocked()
}

func (p *Process) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Send writes v as one JSON line to stdin.
func (p *Process) Send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal stdin line: %w", err)
	}
	return p.SendLine(string(data))
}

// SendLine writes one line (without its newline) to stdin.
func (p *Process) SendLine(line string) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.record(DirIn, line)
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	return nil
}

// CloseStdin closes stdin, which is how headless programs are asked to exit.
func (p *Process) CloseStdin() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if err := p.stdin.Close(); err != nil {
		return fmt.Errorf("close stdin: %w", err)
	}
	return nil
}

// Lines returns a copy of every line so far.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// WaitLine waits for the first line at index from or later that matches, and
// returns it with its index. It fails when ctx ends or the program exits first.
func (p *Process) WaitLine(ctx context.Context, from int, match func(Line) bool) (Line, int, error) {
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				l := p.lines[i]
				p.mu.Unlock()
				return l, i, nil
			}
		}
		from = max(from, len(p.lines))
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.done:
			// Take the lines recorded just before exit into account once more.
			p.mu.Lock()
			for i := from; i < len(p.lines); i++ {
				if match(p.lines[i]) {
					l := p.lines[i]
					p.mu.Unlock()
					return l, i, nil
				}
			}
			p.mu.Unlock()
			return Line{}, -1, fmt.Errorf("program exited (%v) before the awaited line", p.waitErr)
		case <-ctx.Done():
			return Line{}, -1, fmt.Errorf("wait for a program line: %w", ctx.Err())
		}
	}
}

// Wait waits for the program to exit and returns its exit code.
func (p *Process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, fmt.Errorf("wait for program exit: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(p.waitErr, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	if p.waitErr != nil {
		return -1, fmt.Errorf("wait for program: %w", p.waitErr)
	}
	return 0, nil
}

// Kill kills the program and everything it started.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Started is when the program was started; Line offsets count from it.
func (p *Process) Started() time.Time { return p.started }
