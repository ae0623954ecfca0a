package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/workflows"
)

// Restart policy of the supervised dev server. A server that stayed up for
// restartResetAfter is considered healthy again, so an occasional crash always
// restarts quickly, while one that keeps failing at start is given up on after
// maxQuickRestarts attempts instead of spinning forever.
const (
	restartFirstDelay = 500 * time.Millisecond
	restartMaxDelay   = 15 * time.Second
	restartResetAfter = time.Minute
	maxQuickRestarts  = 8
	// stopGrace is how long a stopping server may take before its group is killed.
	stopGrace = 10 * time.Second
)

// temporalServer supervises the Temporal CLI's dev server: it runs it as a
// child process in its own process group (so one signal stops it and
// everything it started) and restarts it on the same database file and ports
// when it exits unexpectedly. Workflows and their timers live in the database
// file, so a restarted server continues where the old one stopped, and the
// platform's clients reconnect on their own.
type temporalServer struct {
	opts temporalOptions
	log  *zap.Logger

	stopping chan struct{} // closed by stop: exits are no longer unexpected
	stopOnce sync.Once
	failed   chan struct{} // closed when the supervisor gives up; err says why
	err      error
	done     chan struct{} // closed when the supervisor has returned

	mu   sync.Mutex
	proc *temporalProcess
}

// temporalProcess is one run of the dev server. Its exit is an event many may
// observe: exited is closed and err kept, never sent once on a channel.
type temporalProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

type temporalOptions struct {
	Binary  string
	Port    int
	UIPort  int
	DBFile  string
	LogFile string
	Restart restartPolicy
}

// restartPolicy is how the supervisor restarts a server that exited; the zero
// value is the dev stack's (restartFirstDelay, restartMaxDelay, maxQuickRestarts).
type restartPolicy struct {
	FirstDelay time.Duration
	MaxDelay   time.Duration
	MaxQuick   int
}

func (p restartPolicy) withDefaults() restartPolicy {
	if p.FirstDelay <= 0 {
		p.FirstDelay = restartFirstDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = restartMaxDelay
	}
	if p.MaxQuick <= 0 {
		p.MaxQuick = maxQuickRestarts
	}
	return p
}

// findTemporal locates the Temporal CLI: the configured path, ./bin/temporal,
// next to the running binary, then PATH.
func findTemporal(configured string) (string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", fmt.Errorf("dev.temporal_bin %s: %w", configured, err)
		}
		return configured, nil
	}
	candidates := []string{filepath.Join("bin", "temporal")}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "temporal"))
	}
	for _, c := range candidates {
		if info, err := os.Stat(c); err == nil && !info.IsDir() {
			return filepath.Abs(c)
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("the Temporal CLI was not found in ./bin, next to astrabox or on PATH: run `make deps` (it builds github.com/temporalio/cli v1.5.1 into ./bin)")
}

// startTemporal starts the dev server and its supervisor. A port already in use
// at this first start is an error naming the setting to change.
func startTemporal(opts temporalOptions, log *zap.Logger) (*temporalServer, error) {
	for _, p := range []struct {
		port int
		key  string
	}{{opts.Port, "dev.temporal_port"}, {opts.UIPort, "dev.temporal_ui_port"}} {
		if err := portFree(p.port); err != nil {
			return nil, fmt.Errorf("temporal dev server: port %d is already in use (set %s to another): %w", p.port, p.key, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(opts.DBFile), 0o755); err != nil {
		return nil, fmt.Errorf("create temporal data folder: %w", err)
	}
	s := &temporalServer{opts: opts, log: log, stopping: make(chan struct{}), failed: make(chan struct{}), done: make(chan struct{})}
	proc, err := s.launch()
	if err != nil {
		return nil, err
	}
	s.proc = proc
	go s.supervise(proc)
	return s, nil
}

// TemporalDBArgs are the dev server's flags for its SQLite file. The file is in
// write-ahead-log mode synced at checkpoints, not at every commit: a killed server
// loses nothing the operating system holds (what the fault suite's SIGKILL tests),
// only a machine's power loss could take its last commits, and every workflow task,
// signal and heartbeat no longer waits for two fsyncs under SQLite's one writer
// lock (with a hundred Sessions a signal took seconds).
func TemporalDBArgs(file string) []string {
	return []string{"--db-filename", file, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"}
}

// launch starts one run of the dev server.
func (s *temporalServer) launch() (*temporalProcess, error) {
	logOut, err := os.OpenFile(s.opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open temporal log: %w", err)
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(s.opts.Port),
		"--ui-port", strconv.Itoa(s.opts.UIPort),
		"--log-level", "warn",
	}
	args = append(args, TemporalDBArgs(s.opts.DBFile)...)
	for name, kind := range workflows.SearchAttributeNames() {
		args = append(args, "--search-attribute", name+"="+kind)
	}
	cmd := exec.Command(s.opts.Binary, args...)
	cmd.Stdout = logOut
	cmd.Stderr = logOut
	// Its own process group: Ctrl-C at the terminal reaches astrabox, which stops
	// the server in order, and a stop signal reaches every process it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logOut.Close()
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	p := &temporalProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logOut.Close()
		close(p.exited)
	}()
	s.log.Info("temporal dev server started", zap.Int("pid", cmd.Process.Pid), zap.Int("port", s.opts.Port), zap.Int("ui_port", s.opts.UIPort))
	return p, nil
}

// supervise restarts the server whenever it exits before stop was called, with a
// bounded backoff, until stop or too many quick failures in a row.
func (s *temporalServer) supervise(proc *temporalProcess) {
	defer close(s.done)
	policy := s.opts.Restart.withDefaults()
	delay := policy.FirstDelay
	quick := 0
	for {
		started := time.Now()
		select {
		case <-s.stopping:
			return
		case <-proc.exited:
		}
		if time.Since(started) >= restartResetAfter {
			delay, quick = policy.FirstDelay, 0
		}
		quick++
		if quick > policy.MaxQuick {
			s.err = fmt.Errorf("the Temporal dev server exited %d times in a row, last: %v (see %s)", quick, proc.err, s.opts.LogFile)
			close(s.failed)
			return
		}
		s.log.Warn("temporal dev server exited unexpectedly; restarting it on the same database",
			zap.NamedError("exit", proc.err), zap.Duration("in", delay), zap.Int("attempt", quick))
		next, err := s.restartAfter(delay)
		if next == nil {
			if err == nil {
				return // stopping
			}
			s.err = err
			close(s.failed)
			return
		}
		delay = min(delay*2, policy.MaxDelay)
		proc = next
	}
}

// restartAfter waits delay, then launches the server again; it returns nil and
// no error when stop was called meanwhile.
func (s *temporalServer) restartAfter(delay time.Duration) (*temporalProcess, error) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-s.stopping:
		return nil, nil
	case <-timer.C:
	}
	// Holding mu while launching makes stop see either no new process (and then
	// launch is not attempted) or the new one.
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopping:
		return nil, nil
	default:
	}
	proc, err := s.launch()
	if err != nil {
		return nil, fmt.Errorf("restart temporal dev server: %w", err)
	}
	s.proc = proc
	return proc, nil
}

// gaveUp is closed when the supervisor stopped restarting the server; failure
// then says why.
func (s *temporalServer) gaveUp() <-chan struct{} { return s.failed }

// failure is the reason the supervisor gave up, once gaveUp is closed.
func (s *temporalServer) failure() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// stop ends supervision, asks the current server to exit and kills its group
// if it has not within the grace period or when ctx ends first. It may be called
// after the supervisor gave up and more than once.
func (s *temporalServer) stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	<-s.done
	pgid := proc.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-proc.exited:
		return nil
	case <-grace.C:
		s.log.Warn("temporal dev server did not stop in time; killing it")
	case <-ctx.Done():
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-proc.exited
	return nil
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}
