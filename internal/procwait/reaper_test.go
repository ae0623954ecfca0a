package procwait

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/testutil/threads"
)

// startChild starts sh with script and its pidfd.
func startChild(t *testing.T, script string, pidfds bool) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pidfd := OnStart(cmd, pidfds)
	require.NoError(t, cmd.Start())
	return cmd, *pidfd
}

// reaped watches cmd's process and sends what its Wait returned.
func reaped(r *Reaper, cmd *exec.Cmd, pidfd int, done chan<- exit) {
	proc := cmd.Process
	r.Watch(pidfd, func() {
		state, err := proc.Wait()
		done <- exit{state, err}
	})
}

func (r *Reaper) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.running && r.set == nil && len(r.exits) == 0
}

// TestReaperWaitsOnManyProcessesWithOneGoroutine: forty children waited on cost the
// reaper one goroutine, parked on the poller, and no thread each; each exit reaps its
// own child with its status, and the reaper is gone once nothing is left to wait on.
func TestReaperWaitsOnManyProcessesWithOneGoroutine(t *testing.T) {
	if !Supported() {
		t.Skip("this kernel has no pidfds")
	}
	const children = 40
	var r Reaper
	goroutinesBefore, threadsBefore := runtime.NumGoroutine(), threads.Count(t)
	done := make(chan exit, children)
	c := startReadingChildren(t, children)
	for i, cmd := range c.cmds {
		reaped(&r, cmd, c.pidfds[i], done)
	}

	require.Eventually(t, func() bool { return threads.ParkedOnPoller(t, "procwait.(*Reaper).run") == 1 }, 20*time.Second, 10*time.Millisecond,
		"one goroutine waits, parked on the poller")
	require.Less(t, runtime.NumGoroutine(), goroutinesBefore+5, "no goroutine per process")
	require.Less(t, threads.Count(t), threadsBefore+children/2, "no thread per process")
	c.endAndRequireTheirStatus(t, done)
	require.Eventually(t, r.idle, 10*time.Second, 10*time.Millisecond, "the reaper's goroutine and set are gone")
}

// TestReaperSeesAnExitBeforeTheWatch: a process that exited before it was watched
// (while the reaper waits on another), the other when it exits, and one watched after
// the reaper stopped are each reaped with their status.
func TestReaperSeesAnExitBeforeTheWatch(t *testing.T) {
	if !Supported() {
		t.Skip("this kernel has no pidfds")
	}
	var r Reaper
	done := make(chan exit, 1)
	requireExit := func(code int) {
		t.Helper()
		e := <-done
		require.NoError(t, e.err)
		require.Equal(t, code, e.state.ExitCode())
	}

	waiting := exec.Command("sh", "-c", "read line; exit 5")
	stdin, err := waiting.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close() })
	waiting.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	waitingFD := OnStart(waiting, true)
	require.NoError(t, waiting.Start())
	reaped(&r, waiting, *waitingFD, done)

	early, earlyFD := startChild(t, "exit 4", true)
	fds := []unix.PollFd{{Fd: int32(earlyFD), Events: unix.POLLIN}}
	_, err = unix.Poll(fds, 10_000)
	require.NoError(t, err)
	require.NotZero(t, fds[0].Revents&unix.POLLIN, "the child exited before the watch")
	reaped(&r, early, earlyFD, done)
	requireExit(4)

	require.NoError(t, stdin.Close())
	requireExit(5)
	require.Eventually(t, r.idle, 10*time.Second, 10*time.Millisecond)

	again, againFD := startChild(t, "exit 6", true)
	reaped(&r, again, againFD, done)
	requireExit(6)
	require.Eventually(t, r.idle, 10*time.Second, 10*time.Millisecond)
}

// TestReaperWithoutAPidfdLeavesTheWaitToTheProcess: where the kernel gave no pidfd
// the callback runs at once and the process's own Wait blocks until it exits.
func TestReaperWithoutAPidfdLeavesTheWaitToTheProcess(t *testing.T) {
	var r Reaper
	done := make(chan exit, 1)
	cmd, pidfd := startChild(t, "exit 3", false)
	require.Equal(t, -1, pidfd)
	reaped(&r, cmd, pidfd, done)
	e := <-done
	require.NoError(t, e.err)
	require.Equal(t, 3, e.state.ExitCode())
	require.True(t, r.idle())
}
