package loadbench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUCountsTheLoadGeneratorsOwnTime burns a fifth of a second of CPU in this
// process and finds it under the load generator's part. Other test binaries
// may run beside it, so only this process's own share is asserted.
func TestCPUCountsTheLoadGeneratorsOwnTime(t *testing.T) {
	self := os.Getpid()
	before := takeCPU()
	start := before.procs[self]
	require.Equal(t, "load generator", start.part, "this process's own stat is read")
	sink := 0
	for {
		for i := range 1_000_000 {
			sink += i
		}
		_, now, ok := procTicks(filepath.Join("/proc", strconv.Itoa(self)))
		require.True(t, ok)
		if now-start.ticks >= clockTicks/5 {
			break
		}
	}
	after := takeCPU()
	cores := after.coresSince(before)
	spent := cores["load generator"] * after.at.Sub(before.at).Seconds()
	assert.GreaterOrEqual(t, spent, 0.2-1.0/clockTicks, "the spent time is the load generator's: %v (%d)", cores, sink)
	assert.Contains(t, cpuLine(cores), "load generator ")
}

// TestPartOfNamesEachProcessByItsNameAndArguments classifies processes as the
// report's parts from their names, their account (any program in a box) and, for
// the platform's own binary, the subcommand it runs.
func TestPartOfNamesEachProcessByItsNameAndArguments(t *testing.T) {
	proc := func(args ...string) string {
		dir := t.TempDir()
		var cmdline []byte
		for _, a := range args {
			cmdline = append(append(cmdline, a...), 0)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmdline"), cmdline, 0o600))
		return dir
	}
	const self = 7
	cases := []struct {
		pid  int
		comm string
		dir  string
		uid  int
		want string
	}{
		{self, "loadbench.test", proc("x"), 1000, "load generator"},
		{8, "postgres", proc("postgres"), 999, "postgres"},
		{9, "temporal", proc("temporal", "server", "start-dev"), 1000, "temporal"},
		{10, "bwrap", proc("bwrap"), 0, "boxes"},
		{11, "astrabox-runner", proc("astrabox-runner"), uidSlotFirst, "boxes"},
		{12, "astrabox", proc("/bin/astrabox", "worker"), 1000, "worker"},
		{13, "astrabox", proc("/bin/astrabox", "serve"), 1000, "api"},
		{14, "astrabox", proc("/bin/astrabox", "bench"), 1000, ""},
		{15, "bash", proc("bash"), 1000, ""},
		{16, "claude", proc("/opt/astrabox/claude/claude"), uidSlotFirst + uidSlotSize + 7, "boxes"},
		{17, "bash", proc("bash", "-c", "make"), uidSlotFirst + uidSlots*uidSlotSize - 1, "boxes"},
		{18, "claude", proc("claude"), uidSlotFirst + uidSlots*uidSlotSize, ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, partOf(c.pid, self, c.comm, c.dir, c.uid), "%s %d", c.comm, c.pid)
	}
}
