package local

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// Smallest limits a box can start under: the runner and bubblewrap's init
// need a few threads and a few megabytes before any program runs.
const (
	minBoxMemory = 32 << 20
	minBoxPids   = 16
)

// checkLimits refuses, before anything starts, limits this machine cannot
// enforce or grant: a box must never run unbounded because a controller is
// missing, nor be promised more than the machine has.
func (b *Backend) checkLimits(l sandbox.Limits) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", sandbox.ErrInvalidSpec, fmt.Sprintf(format, args...))
	}
	if l.WorkspaceBytes > 0 {
		return bad("a workspace size of %d bytes cannot be enforced by the local backend (its workspaces are "+
			"plain folders, without quotas): leave the disk resource unset", l.WorkspaceBytes)
	}
	for _, c := range []struct {
		ctrl string
		want int64
	}{{"memory", l.MemoryBytes}, {"pids", l.Pids}, {"cpu", l.CPUMillis}} {
		if c.want > 0 && !b.cg.have[c.ctrl] {
			return bad("a %s limit cannot be enforced on this machine: no usable %s cgroup controller under %s "+
				"(give the worker a writable cgroup tree, or leave the %s limit unset)", c.ctrl, c.ctrl, b.opts.CgroupRoot, c.ctrl)
		}
	}
	if cores := int64(runtime.NumCPU()); l.CPUMillis > cores*1000 {
		return bad("a CPU limit of %d millicores is more than this machine's %d cores", l.CPUMillis, cores)
	}
	if l.MemoryBytes > 0 && l.MemoryBytes < minBoxMemory {
		return bad("a memory limit of %d bytes is below the %d MiB a box needs to start", l.MemoryBytes, minBoxMemory>>20)
	}
	if total, ok := memTotal(); ok && l.MemoryBytes > total {
		return bad("a memory limit of %d MiB is more than this machine's %d MiB", l.MemoryBytes>>20, total>>20)
	}
	if l.Pids > 0 && l.Pids < minBoxPids {
		return bad("a pids limit of %d is below the %d a box needs to start", l.Pids, minBoxPids)
	}
	return nil
}

// memTotal reads the machine's memory from /proc/meminfo.
func memTotal() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
