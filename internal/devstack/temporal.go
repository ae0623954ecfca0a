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
	"syscall"
	"time"

	"go.uber.org/zap"
)

// SearchAttributes are the custom search attributes Session workflows carry, so
// operators can filter them in the Temporal UI. The dev server registers them
// at start; a cluster deployment registers them once with `temporal operator
// search-attribute create`.
var SearchAttributes = map[string]string{
	"AstraboxSessionId":    "Keyword",
	"AstraboxAgentId":      "Keyword",
	"AstraboxSessionState": "Keyword",
	"AstraboxEngineKind":   "Keyword",
}

// temporalServer is the Temporal CLI's dev server, run as a child process in its
// own process group so one signal stops it and everything it started.
type temporalServer struct {
	cmd  *exec.Cmd
	done chan error
	log  *zap.Logger
}

type temporalOptions struct {
	Binary  string
	Port    int
	UIPort  int
	DBFile  string
	LogFile string
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
	logOut, err := os.OpenFile(opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open temporal log: %w", err)
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(opts.Port),
		"--ui-port", strconv.Itoa(opts.UIPort),
		"--db-filename", opts.DBFile,
		"--log-level", "warn",
	}
	for name, kind := range SearchAttributes {
		args = append(args, "--search-attribute", name+"="+kind)
	}
	cmd := exec.Command(opts.Binary, args...)
	cmd.Stdout = logOut
	cmd.Stderr = logOut
	// Its own process group: Ctrl-C at the terminal reaches astrabox, which stops
	// the server in order, and a stop signal reaches every process it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logOut.Close()
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	s := &temporalServer{cmd: cmd, done: make(chan error, 1), log: log}
	go func() {
		s.done <- cmd.Wait()
		logOut.Close()
	}()
	log.Info("temporal dev server started", zap.Int("pid", cmd.Process.Pid), zap.Int("port", opts.Port), zap.Int("ui_port", opts.UIPort))
	return s, nil
}

// exited reports the server's exit, for a caller waiting on readiness.
func (s *temporalServer) exited() <-chan error { return s.done }

// stop asks the server to exit and kills its group if it has not within the grace period.
func (s *temporalServer) stop(ctx context.Context) error {
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(10 * time.Second)
	defer grace.Stop()
	select {
	case <-s.done:
	case <-grace.C:
		s.log.Warn("temporal dev server did not stop in time; killing it")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}
