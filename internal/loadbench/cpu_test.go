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
// process and finds it under the load generator's part, and in the machine's
// busy time.
func TestCPUCountsTheLoadGeneratorsOwnTime(t *testing.T) {
	self := filepath.Join("/proc", strconv.Itoa(os.Getpid()))
	_, start, ok := procTicks(self)
	require.True(t, ok, "this process's own stat is readable")
	before := takeCPU()
	sink := 0
	for {
		for i := range 1_000_000 {
			sink += i
		}
		_, now, ok := procTicks(self)
		require.True(t, ok)
		if now-start >= clockTicks/5 {
			break
		}
	}
	cores := takeCPU().coresSince(before)
	assert.Positive(t, cores["load generator"], "the spent time is the load generator's: %v (%d)", cores, sink)
	assert.Zero(t, cores["worker"], "no worker runs here")
	assert.Contains(t, cpuLine(cores), "load generator ")
}
