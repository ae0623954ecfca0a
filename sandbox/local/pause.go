package local

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Pause freezes the box: through the cgroup freezer where there is one,
// otherwise with SIGSTOP to every process in the box's pid namespace.
func (b *Backend) Pause(ctx context.Context, id string) error { return b.setPaused(ctx, id, true) }

// Resume thaws a paused box.
func (b *Backend) Resume(ctx context.Context, id string) error { return b.setPaused(ctx, id, false) }

func (b *Backend) setPaused(ctx context.Context, id string, paused bool) error {
	x, err := b.lookup(id)
	if err != nil {
		return err
	}
	if x.deathInfo() != nil {
		return fmt.Errorf("pause %s: %w", id, sandbox.ErrBoxLost)
	}
	rec := x.record()
	if rec.Cgroups && b.cg.have["freezer"] {
		err = b.cg.freeze(ctx, id, paused)
	} else {
		sig := syscall.SIGCONT
		if paused {
			sig = syscall.SIGSTOP
		}
		err = signalNamespace(ctx, rec.InitPID, rec.InitStart, sig)
	}
	if err != nil {
		return fmt.Errorf("pause %s: %w", id, err)
	}
	x.mu.Lock()
	x.rec.Paused = paused
	err = writeRecord(x.dir, x.rec)
	x.mu.Unlock()
	return err
}

// signalNamespace signals every process whose pid namespace is the box's. For
// SIGSTOP it repeats until every process shows as stopped, since delivery is
// asynchronous and a process may fork meanwhile.
//
// The namespace is read from the box's init, known by its pid and start time: a
// box whose init died may have left its number to another process, whose
// namespace (the host's, most likely) must never be taken for the box's.
func signalNamespace(ctx context.Context, initPID int, initStart uint64, sig syscall.Signal) error {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", initPID))
	if err != nil {
		return fmt.Errorf("%w: %v", errNotRunning, err)
	}
	// Read after the link: the same start time means the link was the init's.
	if !alive(initPID, initStart) {
		return fmt.Errorf("%w: its init %d has ended", errNotRunning, initPID)
	}
	if own, err := os.Readlink("/proc/self/ns/pid"); err != nil || own == ns {
		return fmt.Errorf("%w: process %d has no pid namespace of its own", errNotRunning, initPID)
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		running := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if other, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || other != ns {
				continue
			}
			if sig == syscall.SIGSTOP && procState(pid) == "T" {
				continue
			}
			running++
			_ = syscall.Kill(pid, sig)
		}
		if sig != syscall.SIGSTOP || running == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the box to stop: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// procState is the state letter of a process ("R", "S", "T", ...).
func procState(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	fields := splitFields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
