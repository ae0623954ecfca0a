package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

const (
	helperEnv      = "ASTRABOX_LOCAL_TEST_WORKER"
	helperStateEnv = "ASTRABOX_LOCAL_TEST_STATE"
	helperUIDEnv   = "ASTRABOX_LOCAL_TEST_UID"
	helperRunner   = "ASTRABOX_LOCAL_TEST_RUNNER"
	// helperPrewarm has the helper worker fill a prewarm pool of one box and report it
	// instead of creating a box.
	helperPrewarm = "ASTRABOX_LOCAL_TEST_PREWARM"
	readBeforeDie = 5
	burst         = 200
)

// helperMain plays a worker that creates a box, starts a program, reads a few
// of its lines, reports the offset it reached and then waits to be killed.
func helperMain() int {
	uid, _ := strconv.Atoi(os.Getenv(helperUIDEnv))
	opts := Options{StateDir: os.Getenv(helperStateEnv), RunnerPath: os.Getenv(helperRunner), UIDFirst: uid, UIDCount: 100}
	if os.Getenv(helperPrewarm) != "" {
		opts.Prewarm = []PrewarmProfile{{Key: "warm", Size: 1}}
	}
	b, err := New(context.Background(), opts)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	ctx := context.Background()
	if os.Getenv(helperPrewarm) != "" {
		if err := b.Pool().WaitReady(ctx, "warm", 1); err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		infos, err := b.List(ctx)
		if err != nil || len(infos) != 1 {
			fmt.Println("ERROR", len(infos), err)
			return 1
		}
		fmt.Printf("POOLED %s\n", infos[0].ID)
		select {} // killed by the test
	}
	h, err := b.Create(ctx, sandbox.Spec{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	// A burst of numbered lines, then one echo per stdin line.
	script := fmt.Sprintf(`for i in $(seq 1 %d); do echo "n=$i"; done; while read l; do echo "in=$l"; done`, burst)
	if _, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", Argv: []string{"/bin/sh", "-c", script}}); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	s, err := h.ReadOutput(ctx, "agent", 0, true)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	var last int64
	for last < readBeforeDie {
		l, err := s.Next()
		if err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		last = l.Offset
	}
	fmt.Printf("BOX %s %d\n", h.ID(), last)
	select {} // killed by the test
}

// startHelperWorker starts helperMain as a worker process on opts' state folder, with
// env added, and returns it with the fields of the line it reported. The test kills
// it; so does the cleanup, should the test end first.
func startHelperWorker(t *testing.T, opts Options, env ...string) (*exec.Cmd, []string) {
	t.Helper()
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(append(os.Environ(), helperEnv+"=1", helperStateEnv+"="+opts.StateDir,
		helperUIDEnv+"="+strconv.Itoa(opts.UIDFirst), helperRunner+"="+runnerBin), env...)
	worker.Stderr = os.Stderr
	out, err := worker.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, worker.Start())
	t.Cleanup(func() {
		_ = worker.Process.Kill()
		_ = worker.Wait()
	})
	report, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	return worker, strings.Fields(report)
}

// TestWorkerDeathLeavesBoxRunning kills a worker process that created a box
// mid-stream; a new backend on the same state dir finds the box alive and
// resumes its output from the recorded offset with no line repeated or missing.
func TestWorkerDeathLeavesBoxRunning(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	ctx := testContext(t)
	worker, fields := startHelperWorker(t, opts)
	require.Len(t, fields, 3, "worker reported %q", fields)
	require.Equal(t, "BOX", fields[0])
	boxID := fields[1]
	offset, err := strconv.ParseInt(fields[2], 10, 64)
	require.NoError(t, err)

	// The worker dies without any chance to clean up.
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()

	b := newBackend(t, opts)
	h, err := b.Get(ctx, boxID)
	require.NoError(t, err)
	defer h.Close()
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, info.State)

	s, err := h.ReadOutput(ctx, "agent", offset, true)
	require.NoError(t, err)
	defer s.Close()
	lines := readLines(t, s, burst-int(offset))
	for i, l := range lines {
		want := offset + int64(i) + 1
		require.Equal(t, want, l.Offset)
		require.Equal(t, fmt.Sprintf("n=%d", want), string(l.Data))
	}
	// The program still runs: it answers stdin written by the new worker.
	res, err := h.WriteStdin(ctx, "agent", "w1", []byte("hello\n"))
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	next := readLines(t, s, 1)[0]
	require.Equal(t, int64(burst+1), next.Offset)
	require.Equal(t, "in=hello", string(next.Data))
	res, err = h.WriteStdin(ctx, "agent", "w1", []byte("hello\n"))
	require.NoError(t, err)
	require.True(t, res.Duplicate)
}

// TestADeadWorkersPrewarmedBoxIsDestroyed kills a worker process whose prewarm pool
// holds a box nobody claimed: the next backend on the state folder destroys it (its
// pool died with its worker, and no Session owns it), while a live neighbour's pooled
// box stays in its pool.
func TestADeadWorkersPrewarmedBoxIsDestroyed(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	ctx := testContext(t)
	worker, fields := startHelperWorker(t, opts, helperPrewarm+"=1")
	require.Len(t, fields, 2, "worker reported %q", fields)
	require.Equal(t, "POOLED", fields[0])
	orphan := fields[1]
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	rec, err := readRecord(filepath.Join(opts.StateDir, "boxes", orphan))
	require.NoError(t, err)
	require.NotEmpty(t, rec.Pool, "the box waited in its worker's pool")

	neighbourOpts := opts
	neighbourOpts.Prewarm = []PrewarmProfile{{Key: "warm", Size: 1}}
	neighbour := newBackend(t, neighbourOpts)
	require.NoError(t, neighbour.Pool().WaitReady(ctx, "warm", 1))

	b := newBackend(t, opts)
	_, err = b.Get(ctx, orphan)
	require.ErrorIs(t, err, sandbox.ErrNotFound, "the dead worker's pooled box is destroyed")
	_, err = os.Stat(filepath.Join(opts.StateDir, "boxes", orphan))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, 1, neighbour.Pool().Ready("warm"), "a live neighbour's pooled box stays its pool's")
	infos, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1, "only the neighbour's box is left")
}

// TestDeathIsReported kills a box from outside and ends another through its
// program: both are reported lost with their reason, and a write to the dead
// program is an error.
func TestDeathIsReported(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)

	killed, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	deaths, err := b.Watch(ctx, killed.ID())
	require.NoError(t, err)
	rec := mustRecord(t, b, killed.ID())
	require.NoError(t, syscall.Kill(rec.InitPID, syscall.SIGKILL))
	d := <-deaths
	require.Equal(t, killed.ID(), d.BoxID)
	require.Equal(t, "killed", d.Reason, d.Message)
	_, err = killed.Process(ctx, "anything")
	require.ErrorIs(t, err, sandbox.ErrBoxLost)

	ended, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	deaths, err = b.Watch(ctx, ended.ID())
	require.NoError(t, err)
	_, err = ended.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", EndsBox: true,
		Argv: []string{"/bin/sh", "-c", "echo last words; read x; exit 3"}})
	require.NoError(t, err)
	_, err = ended.WriteStdin(ctx, "agent", "w1", []byte("go\n"))
	require.NoError(t, err)
	d = <-deaths
	require.Equal(t, "program_exited", d.Reason)
	require.Contains(t, d.Message, "code 3")
	_, err = ended.WriteStdin(ctx, "agent", "w2", []byte("late\n"))
	require.Error(t, err)
	require.ErrorIs(t, err, sandbox.ErrBoxLost)
	// The journal outlives the box: the last line is still readable.
	s, err := ended.ReadOutput(ctx, "agent", 0, false)
	require.NoError(t, err)
	l, err := s.Next()
	require.NoError(t, err)
	require.Equal(t, "last words", string(l.Data))
	_, err = s.Next()
	require.ErrorIs(t, err, io.EOF)

	info, err := ended.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateFailed, info.State)
}

// TestReapDestroysUnownedBoxes keeps the boxes the caller owns and removes the
// rest, including leftovers of an interrupted creation.
func TestReapDestroysUnownedBoxes(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)
	kept, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	gone, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	goneRec := mustRecord(t, b, gone.ID())
	leftover := b.boxDir("box-leftover")
	require.NoError(t, os.MkdirAll(leftover, 0o711))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(leftover, old, old))

	reaped, err := b.Reap(ctx, func(id string) bool { return id == kept.ID() })
	require.NoError(t, err)
	require.Equal(t, []string{gone.ID()}, reaped)
	require.NoDirExists(t, leftover)
	require.NoDirExists(t, b.boxDir(gone.ID()))
	require.False(t, alive(goneRec.InitPID, goneRec.InitStart), "the reaped box's processes are gone")
	_, err = b.Get(ctx, gone.ID())
	require.True(t, errors.Is(err, sandbox.ErrNotFound))
	require.Equal(t, 0, sh(t, kept, "true").ExitCode)
}

// TestCommittedJournalReadAfterDeath: after a commit frees most of a journal and
// the box dies, the rest is still read from the host.
func TestCommittedJournalReadAfterDeath(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	const total = 3000
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", EndsBox: true, Argv: []string{"/bin/sh", "-c",
		fmt.Sprintf(`seq -f "%%0200g" 1 %d; read x`, total)}})
	require.NoError(t, err)
	s, err := h.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	readLines(t, s, total)
	s.Close()
	require.NoError(t, h.CommitOutput(ctx, "agent", total-2))
	_, err = h.WriteStdin(ctx, "agent", "end", []byte("\n"))
	require.NoError(t, err)
	require.Equal(t, "program_exited", (<-deaths).Reason)

	s, err = h.ReadOutput(ctx, "agent", total-2, false)
	require.NoError(t, err)
	defer s.Close()
	lines := readLines(t, s, 2)
	require.Equal(t, int64(total-1), lines[0].Offset)
	require.Equal(t, fmt.Sprintf("%0200d", total), string(lines[1].Data))
	_, err = s.Next()
	require.ErrorIs(t, err, io.EOF)
	s, err = h.ReadOutput(ctx, "agent", 10, false)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Next()
	require.ErrorIs(t, err, sandbox.ErrOutputReleased)
}

// TestAnotherWorkerOnTheMachineAdoptsABoxItDidNotMake runs two backends on one
// state folder, as two worker processes on one machine do: the one that started
// before the box was made finds it when asked, drives its program, and sees it end
// when its maker destroys it. Only recorded boxes are found.
func TestAnotherWorkerOnTheMachineAdoptsABoxItDidNotMake(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	maker := newBackend(t, opts)
	other := newBackend(t, opts)
	ctx := testContext(t)

	made, err := maker.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	startEcho(ctx, t, made)

	h, err := other.Get(ctx, made.ID())
	require.NoError(t, err, "a box another worker made is found")
	defer h.Close()
	requireEchoes(ctx, t, h)

	deaths, err := other.Watch(ctx, made.ID())
	require.NoError(t, err)
	require.NoError(t, maker.Destroy(ctx, made.ID()))
	d := <-deaths
	require.Equal(t, made.ID(), d.BoxID, "the adopter sees the box end")
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.NotEqual(t, sandbox.StateRunning, info.State)

	for _, id := range []string{"box-000000000000", "../boxes", ""} {
		_, err := other.Get(ctx, id)
		require.ErrorIs(t, err, sandbox.ErrNotFound, "id %q", id)
	}
}

// TestAWorkerStartedWhileAnotherMakesABoxLeavesItToItsMaker starts a second backend
// on the state folder while the first one's Create holds at a stage, as a worker
// process starting on the machine does while its neighbour makes a box: recorded
// but bubblewrap not started, or started but its egress forwarder not yet. The
// newcomer neither takes the box for dead nor ends it, and once it is made finds it
// running and drives its program.
func TestAWorkerStartedWhileAnotherMakesABoxLeavesItToItsMaker(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{stageRecorded, stageLaunched} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t)
			maker := newBackend(t, opts)
			ctx := testContext(t)
			held, resume := make(chan string, 1), make(chan struct{})
			maker.makingHook = func(id, at string) {
				if at == stage {
					held <- id
					<-resume
				}
			}
			type made struct {
				h   sandbox.Handle
				err error
			}
			done := make(chan made, 1)
			go func() {
				h, err := maker.Create(ctx, sandbox.Spec{})
				done <- made{h, err}
			}()
			id := <-held
			other := newBackend(t, opts)
			_, err := other.Get(ctx, id)
			require.ErrorIs(t, err, sandbox.ErrNotFound, "a box being made is its maker's")
			close(resume)
			m := <-done
			require.NoError(t, m.err, "the maker finishes its box")
			defer m.h.Close()
			startEcho(ctx, t, m.h)

			h, err := other.Get(ctx, id)
			require.NoError(t, err)
			defer h.Close()
			requireEchoes(ctx, t, h)
		})
	}
}

// TestABoxIsItsMakersWhileItsMakerLivesAndMakesIt: a box is being made elsewhere
// only while its record names a live maker and does not say it was made; a box
// whose maker died mid-creation, or that an earlier backend recorded without a
// maker, is anyone's to adopt.
func TestABoxIsItsMakersWhileItsMakerLivesAndMakesIt(t *testing.T) {
	self := os.Getpid()
	selfStart, ok := procStart(self)
	require.True(t, ok)
	ended := exec.Command("/bin/true")
	require.NoError(t, ended.Start())
	endedPID := ended.Process.Pid
	endedStart, ok := procStart(endedPID)
	require.True(t, ok, "read the start of a process before it is reaped")
	require.NoError(t, ended.Wait())

	assert.True(t, makingElsewhere(record{MakerPID: self, MakerStart: selfStart}), "a live maker still making it")
	assert.False(t, makingElsewhere(record{MakerPID: self, MakerStart: selfStart, Made: true}), "made")
	assert.False(t, makingElsewhere(record{MakerPID: endedPID, MakerStart: endedStart}), "its maker died mid-creation")
	assert.False(t, makingElsewhere(record{MakerPID: self, MakerStart: selfStart + 1}), "another process under the maker's pid")
	assert.False(t, makingElsewhere(record{}), "recorded by an earlier backend")
}

// startEcho starts the box's "agent" program, which echoes each stdin line as
// "in=<line>".
func startEcho(ctx context.Context, t *testing.T, h sandbox.Handle) {
	t.Helper()
	_, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", Argv: []string{"/bin/sh", "-c", `while read l; do echo "in=$l"; done`}})
	require.NoError(t, err, "the box runs a program")
}

// requireEchoes requires the box running, as h sees it, and its echoing program to
// answer a line written through h.
func requireEchoes(ctx context.Context, t *testing.T, h sandbox.Handle) {
	t.Helper()
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, info.State, "the box runs (not taken for dead: %+v)", info.Death)
	s, err := h.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	defer s.Close()
	_, err = h.WriteStdin(ctx, "agent", "w1", []byte("hello\n"))
	require.NoError(t, err)
	require.Equal(t, "in=hello", string(readLines(t, s, 1)[0].Data))
}
