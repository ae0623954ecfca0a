package faultstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// closeTimeout bounds Close when the caller's context has no deadline.
const closeTimeout = 2 * time.Minute

// Close stops serve and worker, destroys every box the stack's workers made,
// stops the model server, Temporal and PostgreSQL, then fails when any process
// of the stack is still running: one whose command line names the stack's
// folders, or one running under the stack's box accounts. It is safe on a
// partly started stack and a second call does nothing.
func (s *Stack) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	api, worker, temporal, pg := s.api, s.worker, s.temporal, s.pg
	extras := s.extras
	s.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}

	var errs []error
	for _, c := range append([]*child{api, worker}, extras...) {
		if c != nil {
			errs = append(errs, c.stop(ctx))
		}
	}
	if s.stateDir != "" && s.bin.runner != "" && s.uidCount > 0 {
		errs = append(errs, s.reapBoxes(ctx))
	}
	if s.model != nil {
		errs = append(errs, s.model.Close())
	}
	if temporal != nil {
		errs = append(errs, temporal.stop(ctx))
	}
	if pg != nil {
		errs = append(errs, pg.Stop(ctx))
	}
	if s.baseDir != "" {
		errs = append(errs, s.awaitNoLeaks(ctx))
	}
	if s.releaseUIDs != nil {
		s.releaseUIDs()
	}
	err := errors.Join(errs...)
	if err == nil {
		// Kept on failure, so the logs explain it.
		_ = os.RemoveAll(s.baseDir)
		_ = os.RemoveAll(s.stateDir)
	}
	return err
}

// reapBoxes destroys every box under the stack's state folder, also those whose
// worker was killed, through the local backend's own Reap.
func (s *Stack) reapBoxes(ctx context.Context) error {
	b, err := local.New(ctx, local.Options{StateDir: s.stateDir, UIDFirst: s.uidFirst, UIDCount: s.uidCount, RunnerPath: s.bin.runner})
	if err != nil {
		return fmt.Errorf("open the box state to reap it: %w", err)
	}
	_, reapErr := b.Reap(ctx, func(string) bool { return false })
	if reapErr != nil {
		reapErr = fmt.Errorf("reap boxes: %w", reapErr)
	}
	return errors.Join(reapErr, b.Close())
}

// exitGrace is how long Close lets a stopped process finish exiting: pg_ctl reports a
// server stopped once its pid file is gone, a moment before the postmaster exits,
// and on a loaded machine that moment is long.
const exitGrace = 10 * time.Second

// awaitNoLeaks waits up to exitGrace for the stack's processes to be gone and
// reports those still alive.
func (s *Stack) awaitNoLeaks(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, exitGrace)
	defer cancel()
	var last error
	err := poll(ctx, 100*time.Millisecond, "the fault stack's processes to exit", func() (bool, error) {
		last = s.leaks()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// leaks lists the processes of this stack still alive after Close.
func (s *Stack) leaks() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var left []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if why := s.ownedBy(pid); why != "" {
			left = append(left, fmt.Sprintf("pid %d (%s)", pid, why))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("processes of the fault stack left running: %s", strings.Join(left, "; "))
	}
	return nil
}

// ownedBy says why pid belongs to this stack, or "" when it does not.
func (s *Stack) ownedBy(pid int) string {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if stat, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			return ""
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		cmdline := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.Contains(cmdline, s.baseDir) || (s.stateDir != "" && strings.Contains(cmdline, s.stateDir)) {
			return strings.TrimSpace(cmdline)
		}
	}
	if uid, ok := processUID(pid); ok && s.uidCount > 0 && uid >= s.uidFirst && uid < s.uidFirst+s.uidCount {
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		return fmt.Sprintf("box account uid %d: %s", uid, strings.TrimSpace(string(comm)))
	}
	return ""
}

// processUID reads a process's real uid.
func processUID(pid int) (int, bool) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "Uid:" {
			uid, err := strconv.Atoi(fields[1])
			return uid, err == nil
		}
	}
	return 0, false
}

// maxUIDBlockTries bounds the search for a uid block no live process uses.
const maxUIDBlockTries = 20

// takeUIDBlock holds a block of box uids that no running process uses. A box
// leaked by another test run keeps running under its block after that run
// released the block; sharing its uids would weaken the boxes' isolation and
// make the leak check blame this stack for it.
func takeUIDBlock() (first, count int, release func(), err error) {
	var skipped []func()
	defer func() {
		for _, r := range skipped {
			r()
		}
	}()
	for range maxUIDBlockTries {
		first, count, release, err = localtest.UIDBlock()
		if err != nil {
			return 0, 0, nil, err
		}
		if !uidsInUse(first, count) {
			return first, count, release, nil
		}
		skipped = append(skipped, release)
	}
	return 0, 0, nil, fmt.Errorf("no free uid block after %d tries: boxes of other runs use them", maxUIDBlockTries)
}

// uidsInUse reports whether a running process has a uid in [first, first+count).
func uidsInUse(first, count int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid, ok := processUID(pid); ok && uid >= first && uid < first+count {
			return true
		}
	}
	return false
}
