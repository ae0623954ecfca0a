package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// cgroups places boxes in cgroups for limits and pause. It supports cgroup v1
// (one hierarchy per controller, as on this project's machines) and a unified
// cgroup v2 root; controllers that are missing or not writable are reported in
// notes and simply not used.
type cgroups struct {
	v2       bool
	root     string
	parent   string
	have     map[string]bool // memory, pids, cpu, freezer
	notes    []string
	freezeV2 bool
}

func detectCgroups(root, parent string) *cgroups {
	c := &cgroups{root: root, parent: parent, have: map[string]bool{}}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		c.v2 = true
		dir := filepath.Join(root, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.notes = append(c.notes, fmt.Sprintf("cgroup v2 at %s is not writable (%v): no limits, pause uses SIGSTOP", root, err))
			return c
		}
		avail, _ := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		for _, ctrl := range []string{"memory", "pids", "cpu"} {
			if !bytes.Contains(avail, []byte(ctrl)) {
				continue
			}
			// Enable the controller for the boxes below parent; a failure only
			// costs that limit.
			_ = os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+"+ctrl), 0)
			if os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctrl), 0) == nil {
				c.have[ctrl] = true
			}
		}
		c.have["freezer"] = true
		c.freezeV2 = true
	} else {
		for _, ctrl := range []string{"memory", "pids", "cpu", "freezer"} {
			hier := filepath.Join(root, ctrl)
			if _, err := os.Stat(filepath.Join(hier, "cgroup.procs")); err != nil {
				continue
			}
			if err := os.MkdirAll(filepath.Join(hier, parent), 0o755); err == nil {
				c.have[ctrl] = true
			}
		}
	}
	for _, ctrl := range []string{"memory", "pids", "cpu"} {
		if !c.have[ctrl] {
			c.notes = append(c.notes, fmt.Sprintf("no usable %s cgroup controller: that limit is not enforced", ctrl))
		}
	}
	if !c.have["freezer"] {
		c.notes = append(c.notes, "no cgroup freezer: pause sends SIGSTOP to every process of the box")
	}
	return c
}

// parents are the cgroups the boxes are placed under (one per v1 hierarchy, or
// one).
func (c *cgroups) parents() []string {
	if c.v2 {
		if len(c.have) == 0 {
			return nil
		}
		return []string{filepath.Join(c.root, c.parent)}
	}
	var out []string
	for _, ctrl := range []string{"memory", "pids", "cpu", "freezer"} {
		if c.have[ctrl] {
			out = append(out, filepath.Join(c.root, ctrl, c.parent))
		}
	}
	return out
}

// dirs are the cgroup directories of one box, one under each parent.
func (c *cgroups) dirs(id string) []string {
	parents := c.parents()
	out := make([]string, 0, len(parents))
	for _, p := range parents {
		out = append(out, filepath.Join(p, id))
	}
	return out
}

func (c *cgroups) dir(ctrl, id string) string {
	if c.v2 {
		return filepath.Join(c.root, c.parent, id)
	}
	return filepath.Join(c.root, ctrl, c.parent, id)
}

// create makes the box's cgroups and writes its limits.
func (c *cgroups) create(id string, l sandbox.Limits) ([]string, error) {
	dirs := c.dirs(id)
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	write := func(ctrl, file, value string) error {
		if !c.have[ctrl] {
			return nil
		}
		p := filepath.Join(c.dir(ctrl, id), file)
		if err := os.WriteFile(p, []byte(value), 0); err != nil {
			return fmt.Errorf("set %s to %s: %w", p, value, err)
		}
		return nil
	}
	var errs []error
	if l.MemoryBytes > 0 {
		file := "memory.limit_in_bytes"
		if c.v2 {
			file = "memory.max"
		}
		errs = append(errs, write("memory", file, strconv.FormatInt(l.MemoryBytes, 10)))
	}
	if l.Pids > 0 {
		errs = append(errs, write("pids", "pids.max", strconv.FormatInt(l.Pids, 10)))
	}
	if l.CPUMillis > 0 {
		quota := strconv.FormatInt(l.CPUMillis*100, 10) // per 100ms period
		if c.v2 {
			errs = append(errs, write("cpu", "cpu.max", quota+" 100000"))
		} else {
			errs = append(errs, write("cpu", "cpu.cfs_period_us", "100000"), write("cpu", "cpu.cfs_quota_us", quota))
		}
	}
	return dirs, errors.Join(errs...)
}

// removeParent removes the boxes' parent cgroups that no box is in any more: a
// parent holding a box's cgroup stays (the kernel refuses to remove it), for the
// box outlives the backend and a later one adopts it.
func (c *cgroups) removeParent() {
	for _, p := range c.parents() {
		_ = os.Remove(p)
	}
}

// freeze freezes or thaws a box and waits until the kernel reports it done.
func (c *cgroups) freeze(ctx context.Context, id string, frozen bool) error {
	dir := c.dir("freezer", id)
	file, value, done := "freezer.state", "THAWED", "THAWED"
	if frozen {
		value, done = "FROZEN", "FROZEN"
	}
	if c.freezeV2 {
		file, value, done = "cgroup.freeze", "0", "frozen 0"
		if frozen {
			value, done = "1", "frozen 1"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	check := filepath.Join(dir, file)
	if c.freezeV2 {
		check = filepath.Join(dir, "cgroup.events")
	}
	// Freezing is asynchronous (FREEZING first); the kernel offers no event on
	// v1, so poll the state file briefly.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		raw, err := os.ReadFile(check)
		if err != nil {
			return fmt.Errorf("read %s: %w", check, err)
		}
		if strings.Contains(string(raw), done) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for freezer: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// kill sends SIGKILL to every task in the box's cgroups.
func (c *cgroups) kill(id string) {
	for _, d := range c.dirs(id) {
		raw, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// remove deletes the box's cgroups once their tasks are gone.
func (c *cgroups) remove(ctx context.Context, id string) error {
	dirs := c.dirs(id)
	if c.have["freezer"] {
		// Killed tasks of a frozen cgroup only die once thawed.
		_ = c.freeze(ctx, id, false)
	}
	for _, d := range dirs {
		for {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			c.kill(id)
			select {
			case <-ctx.Done():
				return fmt.Errorf("remove cgroup %s: %w", d, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// known lists the box ids that have cgroups, to find leftovers.
func (c *cgroups) known() []string {
	seen := map[string]bool{}
	var out []string
	for _, ctrl := range []string{"memory", "pids", "cpu", "freezer"} {
		if !c.have[ctrl] {
			continue
		}
		parent := filepath.Dir(c.dir(ctrl, "x"))
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "box-") && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	return out
}
