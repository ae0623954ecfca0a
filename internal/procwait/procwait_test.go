package procwait

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil/threads"
)

// TestWaitingOnProcessesHoldsNoThreads starts many children and waits on each as a
// box's and a program's processes are waited on: the waits park goroutines on the
// poller instead of holding a thread each in waitid, and each still reaps its child
// with its status.
func TestWaitingOnProcessesHoldsNoThreads(t *testing.T) {
	if !Supported() {
		t.Skip("this kernel has no pidfds")
	}
	const children = 40
	threadsBefore := threads.Count(t)

	type exited struct {
		state *os.ProcessState
		err   error
	}
	done := make(chan exited, children)
	stdins := make([]io.Closer, 0, children)
	for i := range children {
		cmd := exec.Command("sh", "-c", "read line; exit "+strconv.Itoa(i%3))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		pidfd := OnStart(cmd, true)
		require.NoError(t, cmd.Start())
		require.GreaterOrEqual(t, *pidfd, 0, "Start opened a pidfd")
		stdins = append(stdins, stdin)
		proc, fd := cmd.Process, *pidfd
		go func() {
			Exited(fd)
			state, err := proc.Wait()
			done <- exited{state, err}
		}()
	}
	t.Cleanup(func() {
		for _, c := range stdins {
			_ = c.Close()
		}
	})

	require.Eventually(t, func() bool { return threads.ParkedOnPoller(t, "procwait.Exited") == children }, 20*time.Second, 10*time.Millisecond,
		"every wait parks on the poller")
	require.Less(t, threads.Count(t), threadsBefore+children/2, "the waits hold no thread each")

	for _, c := range stdins {
		require.NoError(t, c.Close())
	}
	codes := map[int]int{}
	for range children {
		e := <-done
		require.NoError(t, e.err)
		codes[e.state.ExitCode()]++
	}
	require.Equal(t, map[int]int{0: 14, 1: 13, 2: 13}, codes, "each wait reaped its own child's status")
}

// TestExitedWithoutAPidfdLeavesTheWaitToTheProcess: where the kernel gave no pidfd
// the wait is the process's own.
func TestExitedWithoutAPidfdLeavesTheWaitToTheProcess(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pidfd := OnStart(cmd, false)
	require.NoError(t, cmd.Start())
	require.Equal(t, -1, *pidfd)
	Exited(*pidfd)
	state, err := cmd.Process.Wait()
	require.NoError(t, err)
	require.Equal(t, 3, state.ExitCode())
}
