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

// exit is what a process's Wait returned.
type exit struct {
	state *os.ProcessState
	err   error
}

// readingChildren are children that each wait for a line and then exit with their
// number modulo 3; closing stdins ends them.
type readingChildren struct {
	cmds   []*exec.Cmd
	pidfds []int
	stdins []io.Closer
}

func startReadingChildren(t *testing.T, n int) readingChildren {
	t.Helper()
	var c readingChildren
	t.Cleanup(func() {
		for _, s := range c.stdins {
			_ = s.Close()
		}
	})
	for i := range n {
		cmd := exec.Command("sh", "-c", "read line; exit "+strconv.Itoa(i%3))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		c.stdins = append(c.stdins, stdin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		pidfd := OnStart(cmd, true)
		require.NoError(t, cmd.Start())
		require.GreaterOrEqual(t, *pidfd, 0, "Start opened a pidfd")
		c.cmds, c.pidfds = append(c.cmds, cmd), append(c.pidfds, *pidfd)
	}
	return c
}

// endAndRequireTheirStatus ends the children and requires each wait to have reaped
// its own child's status.
func (c readingChildren) endAndRequireTheirStatus(t *testing.T, done <-chan exit) {
	t.Helper()
	for _, s := range c.stdins {
		require.NoError(t, s.Close())
	}
	codes, want := map[int]int{}, map[int]int{}
	for i := range c.cmds {
		e := <-done
		require.NoError(t, e.err)
		codes[e.state.ExitCode()]++
		want[i%3]++
	}
	require.Equal(t, want, codes, "each wait reaped its own child's status")
}

// TestWaitingOnProcessesHoldsNoThreads starts many children and waits on each as a
// program's processes are waited on: the waits park goroutines on the poller instead
// of holding a thread each in waitid, and each still reaps its child with its status.
func TestWaitingOnProcessesHoldsNoThreads(t *testing.T) {
	if !Supported() {
		t.Skip("this kernel has no pidfds")
	}
	const children = 40
	threadsBefore := threads.Count(t)
	done := make(chan exit, children)
	c := startReadingChildren(t, children)
	for i, cmd := range c.cmds {
		proc, fd := cmd.Process, c.pidfds[i]
		go func() {
			Exited(fd)
			state, err := proc.Wait()
			done <- exit{state, err}
		}()
	}

	require.Eventually(t, func() bool { return threads.ParkedOnPoller(t, "procwait.Exited") == children }, 20*time.Second, 10*time.Millisecond,
		"every wait parks on the poller")
	require.Less(t, threads.Count(t), threadsBefore+children/2, "the waits hold no thread each")
	c.endAndRequireTheirStatus(t, done)
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
