package loadbench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on
// every Linux architecture the platform runs on).
const clockTicks = 100

// cpuSnapshot is the CPU time each part of the machine has used so far.
type cpuSnapshot struct {
	at time.Time
	// procs are each process's part and CPU time, by pid.
	procs map[int]procCPU
	// busy is the whole machine's non-idle time (/proc/stat), every part and
	// the kernel's own threads and other users' processes with it.
	busy uint64
}

// takeCPU reads every process's CPU time and sums it by part: the boxes (runner,
// bwrap and the programs in them, whatever their names: a process of a box account),
// the API and worker processes, PostgreSQL, the Temporal dev server and this load
// generator (self).
func takeCPU() cpuSnapshot {
	snap := cpuSnapshot{at: time.Now(), procs: map[int]procCPU{}}
	self := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		comm, ticks, ok := procTicks(dir)
		if !ok {
			continue
		}
		if part := partOf(pid, self, comm, dir, ownerOf(dir)); part != "" {
			snap.procs[pid] = procCPU{part: part, ticks: ticks}
		}
	}
	snap.busy = machineBusy()
	return snap
}

type procCPU struct {
	part  string
	ticks uint64
}

// procTicks is a process's name and its user plus system time, read from its
// stat (whose second field, the name, may hold spaces and parentheses).
func procTicks(dir string) (string, uint64, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "", 0, false
	}
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	fields := strings.Fields(string(raw[end+1:]))
	// After the name: state(0) ppid(1) ... utime(11) stime(12).
	if len(fields) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(raw[open+1 : end]), utime + stime, true
}

// ownerOf is the uid a process runs as (its /proc folder's owner), -1 when it is
// gone.
func ownerOf(dir string) int {
	info, err := os.Stat(dir)
	if err != nil {
		return -1
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int(st.Uid)
}

// isBoxUID says whether uid is one of the load generator's box accounts (any
// slot's: the stack's workers' and the floors' boxes).
func isBoxUID(uid int) bool {
	return uid >= uidSlotFirst && uid < uidSlotFirst+uidSlots*uidSlotSize
}

func partOf(pid, self int, comm, dir string, uid int) string {
	switch {
	case pid == self:
		return "load generator"
	case isBoxUID(uid):
		return "boxes"
	case comm == "postgres":
		return "postgres"
	case comm == "temporal":
		return "temporal"
	case comm == "astrabox-runner" || comm == "bwrap" || comm == "scriptagent":
		return "boxes"
	case comm == "astrabox":
		args, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			return ""
		}
		for _, a := range bytes.Split(args, []byte{0}) {
			switch string(a) {
			case "worker":
				return "worker"
			case "serve":
				return "api"
			}
		}
	}
	return ""
}

// machineBusy is the machine's non-idle CPU time in ticks (/proc/stat's first
// line less idle and iowait).
func machineBusy() uint64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	var busy uint64
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			continue
		}
		// user nice system idle iowait irq softirq steal guest guest_nice; guest time
		// is already counted in user.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += v
	}
	return busy
}

// coresSince is the cores each part used on average from before to s, "other"
// being the rest of the machine's busy time. A process that ended in between
// took its time with it; one that started counts from its start.
func (s cpuSnapshot) coresSince(before cpuSnapshot) map[string]float64 {
	secs := s.at.Sub(before.at).Seconds()
	out := map[string]float64{}
	if secs <= 0 {
		return out
	}
	var known float64
	for pid, p := range s.procs {
		was := before.procs[pid]
		if was.part != p.part || was.ticks > p.ticks {
			// The pid was reused by another process.
			was.ticks = 0
		}
		cores := float64(p.ticks-was.ticks) / clockTicks / secs
		out[p.part] += cores
		known += cores
	}
	if s.busy >= before.busy {
		out["other"] = max(0, float64(s.busy-before.busy)/clockTicks/secs-known)
	}
	return out
}

// cpuLine is the report's line of what each part of the machine used, in a fixed
// order.
func cpuLine(cores map[string]float64) string {
	var b strings.Builder
	for _, part := range []string{"boxes", "worker", "api", "postgres", "temporal", "load generator", "other"} {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", part, cores[part])
	}
	return b.String()
}
