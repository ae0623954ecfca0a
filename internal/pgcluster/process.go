package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandOutput runs cmd until it exits or ctx ends and returns its combined output.
func commandOutput(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	// pg_ctl's server child writes to the log file, but bound the wait for inherited
	// pipes all the same.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run %s: %w", filepath.Base(cmd.Path), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return buf.String(), fmt.Errorf("%s: %w", filepath.Base(cmd.Path), ctx.Err())
	}
}

// runningServer reads postmaster.pid and reports a live server on the data folder.
// A stale file (its process gone) is left for postgres, which replaces it on start.
func (c *Cluster) runningServer() (*AlreadyRunningError, error) {
	f, err := os.Open(filepath.Join(c.opts.DataDir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read postmaster.pid: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read postmaster.pid: %w", err)
	}
	// Line 1 is the postmaster's pid, line 4 its port (PostgreSQL's documented layout).
	if len(lines) < 4 {
		return nil, nil
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 || !isPostgresProcess(pid) {
		return nil, nil
	}
	port, _ := strconv.Atoi(lines[3])
	return &AlreadyRunningError{DataDir: c.opts.DataDir, PID: pid, Port: port}, nil
}

// isPostgresProcess reports whether pid is alive and is a postgres server, so that a
// pid reused by another program after a crash is not mistaken for the cluster.
func isPostgresProcess(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		// Without /proc the signal probe is the best evidence available.
		return true
	}
	return strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres")
}

// StopDataDir stops, in immediate mode, a server left running on dataDir by a process
// that died without stopping it. It does nothing when no server runs there.
func StopDataDir(ctx context.Context, dataDir string) error {
	opts, err := withDefaults(Options{DataDir: dataDir, Port: 1})
	if err != nil {
		return err
	}
	acct, err := serverAccount()
	if err != nil {
		return err
	}
	c := &Cluster{opts: opts, account: acct, logger: opts.Logger}
	running, err := c.runningServer()
	if err != nil || running == nil {
		return err
	}
	if out, err := c.run(ctx, "pg_ctl", "stop", "-D", dataDir, "-m", "immediate", "-w", "-t", strconv.Itoa(secondsLeft(ctx))); err != nil {
		return fmt.Errorf("stop leftover postgresql on %s: %w: %s", dataDir, err, out)
	}
	return nil
}
