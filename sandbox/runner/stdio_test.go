package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/testutil/threads"
	"github.com/astrabox/astrabox/sandbox"
)

// nonBlocking reports whether f's descriptor has O_NONBLOCK, without f.Fd (which
// would make it blocking).
func nonBlocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	var flags int
	var flagsErr error
	require.NoError(t, rc.Control(func(fd uintptr) { flags, flagsErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }))
	require.NoError(t, flagsErr)
	return flags&unix.O_NONBLOCK != 0
}

func TestStdioPairIsNonBlockingOnTheRunnersEndOnly(t *testing.T) {
	runnerEnd, programEnd, err := stdioPair()
	require.NoError(t, err)
	defer runnerEnd.Close()
	defer programEnd.Close()
	assert.True(t, nonBlocking(t, runnerEnd), "the runner's end parks on the poller")
	assert.False(t, nonBlocking(t, programEnd), "the program's standard stream blocks, as programs expect")
}

// A quiet program's output and exit are waited for on the poller: neither an OS
// thread per stream and per program nor the runtime monitor's busy polling that a
// thread in read(2) or waitid(2) brings.
func TestQuietProgramsAreAwaitedWithoutAThreadEach(t *testing.T) {
	const programs = 20
	threadsBefore := threads.Count(t)
	dir := t.TempDir()
	var started []*process
	t.Cleanup(func() {
		for _, p := range started {
			p.closeStdin()
			<-p.exited
			p.journal.close()
		}
	})
	for i := range programs {
		spec := sandbox.ProcessSpec{ID: "quiet-" + strconv.Itoa(i), Argv: []string{"cat"}}
		p, err := startProcess(spec, filepath.Join(dir, spec.ID), os.Environ(), dir, account{}, time.Second)
		require.NoError(t, err)
		started = append(started, p)
	}
	require.Eventually(t, func() bool { return threads.ParkedOnPoller(t, "runner.(*process).pump") == 2*programs }, 20*time.Second, 10*time.Millisecond,
		"every stdout and stderr reader parks on the poller")
	assert.Less(t, threads.Count(t), threadsBefore+programs/2, "the readers and the waits hold no thread each")
}
