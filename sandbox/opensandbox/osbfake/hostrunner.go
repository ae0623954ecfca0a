package osbfake

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// HostRunner runs each sandbox's entry point, which must be `astrabox-runner
// serve -listen ADDR`, as a process on this host: the image's runner path is
// replaced by Runner, and, since host processes share one network and file
// system where containers each have their own, the runner listens on a free
// loopback port (the port the box "publishes") and its workspace and state
// folders are folders of the box under Root (its "volumes"). Everything else
// (the environment with the token, the program account) is the request's.
type HostRunner struct {
	Runner string
	Root   string
}

// Start implements Runtime.
func (h HostRunner) Start(id string, req CreateRequest) (Box, error) {
	args, port, err := entrypointArgs(req.Entrypoint)
	if err != nil {
		return nil, err
	}
	hostPort, err := freeport.Reserve()
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if a == "-listen" {
			args[i+1] = fmt.Sprintf("127.0.0.1:%d", hostPort)
		}
	}
	dir := filepath.Join(h.Root, id[:8])
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("box folder: %w", err)
	}
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	env[runnerapi.EnvWorkspace] = filepath.Join(dir, "workspace")
	env[runnerapi.EnvStateDir] = filepath.Join(dir, "state")
	cmd := exec.Command(h.Runner, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(dir, "runner.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start runner: %w", err)
	}
	b := &hostBox{cmd: cmd, dir: dir, log: logf, port: port, addr: fmt.Sprintf("127.0.0.1:%d", hostPort), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		b.code = cmd.ProcessState.ExitCode()
		close(b.exited)
	}()
	return b, nil
}

type hostBox struct {
	cmd    *exec.Cmd
	dir    string
	log    *os.File
	port   int
	addr   string
	exited chan struct{}
	code   int
	stop   sync.Once
}

func (b *hostBox) Endpoint(port int) (string, bool) {
	if port != b.port {
		return "", false
	}
	return b.addr, true
}

func (b *hostBox) Exited() <-chan struct{} { return b.exited }
func (b *hostBox) ExitCode() int           { return b.code }

// Pause stops every process of the box, as a cgroup freezer does.
func (b *hostBox) Pause() error  { return b.signalAll(syscall.SIGSTOP) }
func (b *hostBox) Resume() error { return b.signalAll(syscall.SIGCONT) }

func (b *hostBox) signalAll(sig syscall.Signal) error {
	var errs []error
	for _, pid := range b.tree() {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tree lists the runner and every process below it, or nothing once the runner was
// reaped: the list is read by number, and a reaped runner's number, with the chain
// of parents below it, may by then be another process's.
func (b *hostBox) tree() []int {
	pids := descendants(b.cmd.Process.Pid)
	// Asked through the process's own handle (a pidfd), which no other process shares.
	if b.cmd.Process.Signal(syscall.Signal(0)) != nil {
		return nil
	}
	return pids
}

// Stop kills the runner and everything it started (each in a process group of
// its own), then removes the box's folder.
func (b *hostBox) Stop() error {
	b.stop.Do(func() {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			pids := b.tree()
			if len(pids) == 0 && b.hasExited() {
				break
			}
			// The runner first, so that a client following output sees its
			// connection cut as a lost box does, not a process that ended.
			_ = b.cmd.Process.Signal(syscall.SIGKILL)
			for _, pid := range pids {
				if pid != b.cmd.Process.Pid {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			select {
			case <-b.exited:
			case <-time.After(20 * time.Millisecond):
			}
		}
		b.log.Close()
		_ = os.RemoveAll(b.dir)
	})
	return nil
}

func (b *hostBox) hasExited() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

// descendants lists root and every process below it (read from /proc).
func descendants(root int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			parent[pid] = ppid
		}
	}
	var out []int
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
