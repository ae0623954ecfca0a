// Package temporaldev runs the Temporal CLI's dev server as a supervised child
// process on a SQLite file: restarted on the same file and ports when it exits
// unexpectedly, and when its store stops answering (see health.go). Workflows
// and their timers live in the file, so a restarted server continues where the
// old one stopped, and its clients reconnect on their own. The dev stack
// (`astrabox dev`) and the tests' shared server both run it.
package temporaldev

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Restart policy of the supervised server. A server that stayed up for
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

// Options say how to run the server.
type Options struct {
	// Binary is the Temporal CLI.
	Binary string
	// Port is the frontend's; UIPort the web UI's, or 0 for none (headless).
	Port   int
	UIPort int
	// DBFile is the SQLite file; its folder is created.
	DBFile string
	// LogFile receives the server's output, appended to across restarts; when
	// empty, the output goes to this process's standard error.
	LogFile string
	// LogLevel is the server's (warn when empty).
	LogLevel string
	// ExtraArgs follow the others (search attributes, dynamic configuration).
	ExtraArgs []string
	// Restart is the policy for a server that exited; the zero value is the
	// default one.
	Restart RestartPolicy
	// Health is how the store's health is watched; the zero value is the
	// default watch.
	Health HealthPolicy
}

// RestartPolicy is how the supervisor restarts a server that exited.
type RestartPolicy struct {
	FirstDelay time.Duration
	MaxDelay   time.Duration
	MaxQuick   int
}

func (p RestartPolicy) withDefaults() RestartPolicy {
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

// Server supervises one dev server: it runs it as a child process in its own
// process group (so one signal stops it and everything it started) and starts
// it again on the same database file and ports when it exits or its store
// stops answering.
type Server struct {
	opts Options
	log  *zap.Logger

	stopping chan struct{} // closed by Stop: exits are no longer unexpected
	stopOnce sync.Once
	failed   chan struct{} // closed when the supervisor gives up; err says why
	err      error
	done     chan struct{} // closed when the supervisor and the watch have returned

	mu   sync.Mutex
	proc *process
}

// process is one run of the dev server. Its exit is an event many may observe:
// exited is closed and err kept, never sent once on a channel.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts the server and its supervisor. It does not wait for the server
// to serve (WaitServing does).
func Start(opts Options, log *zap.Logger) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(opts.DBFile), 0o755); err != nil {
		return nil, fmt.Errorf("create temporal data folder: %w", err)
	}
	s := &Server{opts: opts, log: log, stopping: make(chan struct{}), failed: make(chan struct{}), done: make(chan struct{})}
	proc, err := s.launch()
	if err != nil {
		return nil, err
	}
	s.proc = proc
	health, err := newStoreProbe(opts.Port, opts.Health.probe)
	if err != nil {
		_ = syscall.Kill(-proc.cmd.Process.Pid, syscall.SIGKILL)
		<-proc.exited
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.supervise(proc) }()
	go func() { defer wg.Done(); s.watchStore(health) }()
	go func() { wg.Wait(); health.close(); close(s.done) }()
	return s, nil
}

// DBArgs are the dev server's flags for its SQLite file. The file is in
// write-ahead-log mode synced at checkpoints, not at every commit: a killed server
// loses nothing the operating system holds (what the fault suite's SIGKILL tests),
// only a machine's power loss could take its last commits, and every workflow task,
// signal and heartbeat no longer waits for two fsyncs under SQLite's one writer
// lock (with a hundred Sessions a signal took seconds).
func DBArgs(file string) []string {
	return []string{"--db-filename", file, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"}
}

// launch starts one run of the dev server.
func (s *Server) launch() (*process, error) {
	logOut := os.Stderr
	if s.opts.LogFile != "" {
		f, err := os.OpenFile(s.opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open temporal log: %w", err)
		}
		logOut = f
	}
	closeLog := func() {
		if logOut != os.Stderr {
			logOut.Close()
		}
	}
	level := s.opts.LogLevel
	if level == "" {
		level = "warn"
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(s.opts.Port), "--log-level", level}
	if s.opts.UIPort > 0 {
		args = append(args, "--ui-port", strconv.Itoa(s.opts.UIPort))
	} else {
		args = append(args, "--headless")
	}
	args = append(args, DBArgs(s.opts.DBFile)...)
	args = append(args, s.opts.ExtraArgs...)
	cmd := exec.Command(s.opts.Binary, args...)
	cmd.Stdout = logOut
	cmd.Stderr = logOut
	// Its own process group: Ctrl-C at the terminal reaches the supervisor's
	// process, which stops the server in order, and a stop signal reaches every
	// process it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		closeLog()
		close(p.exited)
	}()
	s.log.Info("temporal dev server started", zap.Int("pid", cmd.Process.Pid), zap.Int("port", s.opts.Port), zap.Int("ui_port", s.opts.UIPort))
	return p, nil
}

// supervise restarts the server whenever it exits before Stop was called, with a
// bounded backoff, until Stop or too many quick failures in a row.
func (s *Server) supervise(proc *process) {
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
// no error when Stop was called meanwhile.
func (s *Server) restartAfter(delay time.Duration) (*process, error) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-s.stopping:
		return nil, nil
	case <-timer.C:
	}
	// Holding mu while launching makes Stop see either no new process (and then
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

// kill ends the current run's process group at once, as an outage would; the
// supervisor then starts it again.
func (s *Server) kill() {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	_ = syscall.Kill(-proc.cmd.Process.Pid, syscall.SIGKILL)
}

// GaveUp is closed when the supervisor stopped restarting the server; Failure
// then says why.
func (s *Server) GaveUp() <-chan struct{} { return s.failed }

// Failure is the reason the supervisor gave up, once GaveUp is closed.
func (s *Server) Failure() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// Stop ends supervision, asks the current server to exit and kills its group
// if it has not within the grace period or when ctx ends first. It may be called
// after the supervisor gave up and more than once.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	<-s.done
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
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
