package faultstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child has to exit after SIGTERM before it is killed.
const stopGrace = 15 * time.Second

// child is one process the stack started: a platform role or the Temporal dev
// server. It runs in its own process group, its output goes to a log file, and
// its unexpected exit is recorded so a test can tell a crash from a fault it
// injected itself.
type child struct {
	name string
	// role is the platform role it runs ("serve", "worker"); empty for Temporal.
	role    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}

	mu sync.Mutex
	// expected is set before the stack stops or kills the child on purpose.
	expected bool
	err      error
}

// startChild starts argv with env, appending its output to logPath.
func startChild(name string, argv, env []string, logPath string) (*child, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(out, "\n==== %s start %s: %s\n", name, time.Now().UTC().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	// Its own group, so a kill reaches whatever it started in-process; the
	// parent-death signal ends it if the harness itself dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		out.Close()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exitedUnexpectedly reports an exit the stack did not cause.
func (c *child) exitedUnexpectedly() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expected {
		return nil
	}
	return fmt.Errorf("%s (pid %d) %w: %v; %s; log %s:\n%s", c.name, c.pid(), errExitedOnItsOwn, c.err,
		firstFailure(c.logPath, c.name), c.logPath, tail(c.logPath, 3000))
}

// errExitedOnItsOwn marks the exit of a child the stack did not stop or kill.
var errExitedOnItsOwn = errors.New("exited on its own")

// firstFailure returns the first line of the child's last run that reads as
// its failure (a panic, a fatal or an error), which a crash's long stack trace
// would push out of the log's tail.
func firstFailure(path, name string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	run := string(data)
	// A run's output follows its start line, which quotes its command.
	if i := strings.LastIndex(run, "==== "+name+" start "); i >= 0 {
		run = run[i:]
		if nl := strings.IndexByte(run, '\n'); nl >= 0 {
			run = run[nl+1:]
		}
	}
	for _, line := range strings.Split(run, "\n") {
		lower := strings.ToLower(line)
		if strings.Contains(lower, "panic") || strings.Contains(lower, "fatal") || strings.Contains(lower, "error") {
			const max = 600
			if len(line) > max {
				line = line[:max] + "…"
			}
			return "first failure in its log: " + strings.TrimSpace(line)
		}
	}
	return "no failure line in its log"
}

// kill sends SIGKILL to the child's group and waits for it, as a crash would.
func (c *child) kill(ctx context.Context) error {
	c.mu.Lock()
	c.expected = true
	c.mu.Unlock()
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s did not die after SIGKILL: %w", c.name, ctx.Err())
	}
}

// stop asks the child to exit (SIGTERM) and kills it after stopGrace.
func (c *child) stop(ctx context.Context) error {
	c.mu.Lock()
	c.expected = true
	c.mu.Unlock()
	_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-c.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	<-c.done
	return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", c.name, stopGrace)
}

// tail returns the last max bytes of a log file, for failure messages.
func tail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// errStopped is returned by operations on a stack that was closed.
var errStopped = errors.New("faultstack: the stack is closed")
