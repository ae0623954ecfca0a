// Package threads counts a test process's OS threads and the goroutines parked on Go's
// network poller, for tests that check a wait holds no thread of its own.
package threads

import (
	"bytes"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// Count is this process's OS thread count.
func Count(t testing.TB) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read /proc/self/status: %v", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("read the thread count %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// ParkedOnPoller counts the goroutines with frame (a function's name as a stack
// shows it, such as "procwait.Exited") in their stack that are parked on the poller.
func ParkedOnPoller(t testing.TB, frame string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatalf("dump goroutines: %v", err)
	}
	n := 0
	for _, stack := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(stack, frame) && strings.Contains(stack, "internal/poll.runtime_pollWait") {
			n++
		}
	}
	return n
}
