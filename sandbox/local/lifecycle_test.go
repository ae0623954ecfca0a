package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

// boxTaskStates returns the state letter (/proc/<pid>/stat field 3) of every
// process in the box's pid namespace.
func boxTaskStates(t *testing.T, initPID int) map[int]string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", initPID))
	require.NoError(t, err)
	out := map[int]string{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if other, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || other != ns {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		fields := splitFields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		out[pid] = fields[0]
	}
	return out
}

func testPauseResume(t *testing.T, opts Options, wantState string) {
	b := newBackend(t, opts)
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "echo", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	rec := mustRecord(t, b, h.ID())

	require.NoError(t, b.Pause(ctx, h.ID()))
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StatePaused, info.State)
	states := boxTaskStates(t, rec.InitPID)
	require.GreaterOrEqual(t, len(states), 3, "init, runner and cat")
	for pid, st := range states {
		require.Equal(t, wantState, st, "process %d is not paused", pid)
	}

	require.NoError(t, b.Resume(ctx, h.ID()))
	info, err = h.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.StateRunning, info.State)
	_, err = h.WriteStdin(ctx, "echo", "w1", []byte("after resume\n"))
	require.NoError(t, err)
	s, err := h.ReadOutput(ctx, "echo", 0, true)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "after resume", string(readLines(t, s, 1)[0].Data))
}

// TestPauseWithFreezer pauses through the cgroup v1 freezer of this machine.
func TestPauseWithFreezer(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	_, err := os.Stat("/sys/fs/cgroup/freezer/cgroup.procs")
	require.NoError(t, err, "this test needs the cgroup v1 freezer (the project's machines have it)")
	// Frozen tasks sleep uninterruptibly in the kernel's freezer.
	testPauseResume(t, opts, "D")
}

// TestPauseWithoutCgroups falls back to SIGSTOP when no cgroups are usable.
func TestPauseWithoutCgroups(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.CgroupRoot = t.TempDir() // no hierarchies here
	b := newBackend(t, opts)
	caps := b.Capabilities()
	require.False(t, caps.ResourceLimits)
	require.True(t, caps.Pause)
	require.Contains(t, strings.Join(caps.Notes, "\n"), "SIGSTOP")
	require.NoError(t, b.Close())
	testPauseResume(t, opts, "T")
}

// TestSignalNamespaceNeedsTheBoxesOwnInit: pausing by signals reaches the box's pid
// namespace through its init. A process of the host's own namespace (what a dead
// init's number may come to name) or an init whose start time changed is refused, so
// a pause never reaches beyond the box. SIGCONT keeps the check harmless if it fails.
func TestSignalNamespaceNeedsTheBoxesOwnInit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	start, ok := procStart(cmd.Process.Pid)
	require.True(t, ok)

	err := signalNamespace(ctx, cmd.Process.Pid, start, syscall.SIGCONT)
	require.ErrorIs(t, err, errNotRunning, "a host process is no box's init")
	err = signalNamespace(ctx, cmd.Process.Pid, start+1, syscall.SIGCONT)
	require.ErrorIs(t, err, errNotRunning, "a number taken by another process")
}

// TestPrewarmedClaim serves a claim from a pool filled before the call, with
// resident services already running, and refills the pool.
func TestPrewarmedClaim(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	spec := sandbox.Spec{Services: []sandbox.Service{{Process: sandbox.ProcessSpec{ID: "resident",
		Argv: []string{"/bin/sh", "-c", "echo resident up; exec sleep 600"}}}}}
	opts.Prewarm = []PrewarmProfile{{Key: "claude-default", Spec: spec, Size: 1}}
	b := newBackend(t, opts)
	ctx := testContext(t)
	_, err := b.Claim(ctx, "unknown-profile")
	require.ErrorIs(t, err, sandbox.ErrNoWarmBox)

	require.NoError(t, b.Pool().WaitReady(ctx, "claude-default", 1))
	before := time.Now()
	h, err := b.Claim(ctx, "claude-default")
	require.NoError(t, err)
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.CreatedAt.Before(before), "the box existed before the claim")
	require.Equal(t, "claude-default", info.ProfileKey)
	st, err := h.Process(ctx, "resident")
	require.NoError(t, err)
	require.True(t, st.Running)
	require.Empty(t, mustRecord(t, b, h.ID()).Pool, "a claimed box leaves the pool")

	// The pool refills in the background with a different box.
	require.NoError(t, b.Pool().WaitReady(ctx, "claude-default", 1))
	again, err := b.Claim(ctx, "claude-default")
	require.NoError(t, err)
	require.NotEqual(t, h.ID(), again.ID())
	// Reap keeps what the pool holds and what the caller owns.
	require.NoError(t, b.Pool().WaitReady(ctx, "claude-default", 1))
	reaped, err := b.Reap(ctx, func(id string) bool { return id == h.ID() })
	require.NoError(t, err)
	require.Equal(t, []string{again.ID()}, reaped)
	require.Equal(t, 1, b.Pool().Ready("claude-default"))
}

// TestBadSpecsAreRefusedBeforeStart checks the spec before anything starts.
func TestBadSpecsAreRefusedBeforeStart(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)
	for name, spec := range map[string]sandbox.Spec{
		"missing image":     {Image: sandbox.Image{Root: "/nonexistent/image"}},
		"image uri only":    {Image: sandbox.Image{URI: "docker.io/library/debian:12"}},
		"unknown forward":   {Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 18080}}}},
		"bad account":       {Identity: sandbox.Identity{Account: "Root Account"}},
		"missing mount":     {Mounts: []sandbox.Mount{{Source: "/nonexistent/dir", Target: "/opt/x"}}},
		"volume needs name": {Workspace: sandbox.Workspace{Kind: sandbox.WorkspacePersistent}},
	} {
		_, err := b.Create(ctx, spec)
		require.ErrorIs(t, err, sandbox.ErrInvalidSpec, name)
	}
	entries, err := os.ReadDir(filepath.Join(opts.StateDir, "boxes"))
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was started")
}

// TestStartupErrorsNameTheFix covers a missing bubblewrap and unusable uid ranges.
func TestStartupErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	for name, tc := range map[string]struct {
		change func(*Options)
		want   string
	}{
		"no bwrap":       {func(o *Options) { o.BwrapPath = "/nonexistent/bwrap" }, "apt-get install bubblewrap"},
		"system uids":    {func(o *Options) { o.UIDFirst = 10 }, "first uid of at least 1000"},
		"existing user":  {func(o *Options) { o.UIDFirst, o.UIDCount = 65000, 1000 }, "existing account nobody"},
		"no runner":      {func(o *Options) { o.RunnerPath = "/nonexistent/runner" }, "make build"},
		"relative state": {func(o *Options) { o.StateDir = "state" }, "absolute path"},
	} {
		o := opts
		tc.change(&o)
		_, err := New(testContext(t), o)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), tc.want, name)
	}
}

// TestImageDirectoryRoot runs a box on an unpacked root filesystem: only what
// the image holds is there, read-only.
func TestImageDirectoryRoot(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)
	img := t.TempDir()
	for _, d := range []string{"dev", "proc", "tmp", "run", "workspace", "etc"} {
		require.NoError(t, os.MkdirAll(filepath.Join(img, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(img, "etc/passwd"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(img, "marker"), []byte("from the image"), 0o644))
	require.NoError(t, os.Chmod(img, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(img), 0o755))

	h, err := b.Create(ctx, sandbox.Spec{Image: sandbox.Image{Root: img}})
	require.NoError(t, err)
	got, err := h.ReadFile(ctx, "/marker")
	require.NoError(t, err)
	require.Equal(t, "from the image", string(got))
	passwd, err := h.ReadFile(ctx, "/etc/passwd")
	require.NoError(t, err)
	require.Contains(t, string(passwd), "agent:x:")
	err = h.WriteFile(ctx, "/marker", []byte("changed"), 0o644)
	require.Error(t, err)
	require.Contains(t, err.Error(), "read-only file system")
	_, err = h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "true"}})
	require.Error(t, err, "the image has no shell")
	require.NoError(t, h.WriteFile(ctx, "/workspace/out", []byte("ok"), 0o600))
	entries, err := h.ListDir(ctx, "/")
	require.NoError(t, err)
	require.True(t, slicesContainPath(entries, "/marker"))
	require.False(t, errors.Is(err, sandbox.ErrBoxLost))
}

func slicesContainPath(entries []sandbox.FileInfo, path string) bool {
	for _, e := range entries {
		if e.Path == path {
			return true
		}
	}
	return false
}

// TestPersistentWorkspaceOutlivesRelease: a released box's volume is mounted by
// the next box, owned by the new box's account; its programs got SIGTERM.
func TestPersistentWorkspaceOutlivesRelease(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	spec := sandbox.Spec{Workspace: sandbox.Workspace{Kind: sandbox.WorkspacePersistent, Volume: "conv-" + t.Name()}}
	first, err := b.Create(ctx, spec)
	require.NoError(t, err)
	_, err = first.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", Argv: []string{"/bin/sh", "-c",
		`trap 'echo terminated > /workspace/stop.txt; exit 0' TERM; echo up; while :; do sleep 1; done`}})
	require.NoError(t, err)
	s, err := first.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	require.Equal(t, "up", string(readLines(t, s, 1)[0].Data), "the trap is set")
	s.Close()
	require.NoError(t, first.WriteFile(ctx, "/workspace/notes.txt", []byte("kept"), 0o600))
	deaths, err := b.Watch(ctx, first.ID())
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx, first.ID()))
	require.Equal(t, "released", (<-deaths).Reason)

	second, err := b.Create(ctx, spec)
	require.NoError(t, err)
	got, err := second.ReadFile(ctx, "/workspace/notes.txt")
	require.NoError(t, err)
	require.Equal(t, "kept", string(got))
	got, err = second.ReadFile(ctx, "/workspace/stop.txt")
	require.NoError(t, err)
	require.Equal(t, "terminated\n", string(got))
	require.NoError(t, second.WriteFile(ctx, "/workspace/notes.txt", []byte("rewritten"), 0o600),
		"the volume now belongs to the second box's account")
}

// TestTimeoutEndsBox destroys a box once its timeout passes.
func TestTimeoutEndsBox(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	d := <-deaths
	require.Equal(t, "expired", d.Reason, d.Message)
}

// TestLimitsAreEnforced checks the cgroup limits and the sized /tmp of a box.
func TestLimitsAreEnforced(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.DefaultLimits = sandbox.Limits{MemoryBytes: 256 << 20}
	b := newBackend(t, opts)
	require.True(t, b.Capabilities().ResourceLimits, "this machine has cgroups: %v", b.Capabilities().Notes)
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{Pids: 48, CPUMillis: 500, TmpBytes: 8 << 20}})
	require.NoError(t, err)
	rec := mustRecord(t, b, h.ID())
	read := func(ctrl, file string) string {
		raw, err := os.ReadFile(filepath.Join(b.cg.dir(ctrl, h.ID()), file))
		require.NoError(t, err)
		return strings.TrimSpace(string(raw))
	}
	require.Equal(t, strconv.Itoa(256<<20), read("memory", "memory.limit_in_bytes"), "default limit applied")
	// The pids limit counts threads, and the runner's grow with blocking calls:
	// it leaves room for the runner, and a fork storm still exceeds it.
	require.Equal(t, "48", read("pids", "pids.max"))
	require.Equal(t, "50000", read("cpu", "cpu.cfs_quota_us"))
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", rec.InitPID))
	require.NoError(t, err)
	require.Contains(t, string(raw), "/"+h.ID(), "the box runs inside its cgroups")

	// Programs, not the runner, are the memory limit's first victims.
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "oom", Argv: []string{"/bin/sh", "-c", "read x; cat /proc/self/oom_score_adj"}})
	require.NoError(t, err)
	_, err = h.WriteStdin(ctx, "oom", "go", []byte("\n"))
	require.NoError(t, err)
	s, err := h.ReadOutput(ctx, "oom", 0, true)
	require.NoError(t, err)
	require.Equal(t, "500", string(readLines(t, s, 1)[0].Data))
	s.Close()

	res := sh(t, h, "df -k /tmp | tail -1")
	require.Contains(t, string(res.Stdout), " 8192 ", "a sized /tmp: %s", res.Stderr)
	res = sh(t, h, "for i in $(seq 1 100); do sleep 30 & done")
	require.Contains(t, string(res.Stderr), "fork", "the pids limit stops a fork storm")
}

// TestAServiceThatNeverListensFailsTheBoxClearly: a resident service still not
// listening on its ready port after ReadyTimeout fails the create with
// sandbox.ErrNotReady naming the service, the port and its last output, and the box
// is gone.
func TestAServiceThatNeverListensFailsTheBoxClearly(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.ReadyTimeout = 5 * time.Second
	b := newBackend(t, opts)
	ctx := testContext(t)
	spec := sandbox.Spec{Services: []sandbox.Service{{ReadyPort: 7400, Process: sandbox.ProcessSpec{ID: "server",
		Argv: []string{"/bin/sh", "-c", "echo waiting for a model; exec sleep 600"}}}}}
	_, err := b.Create(ctx, spec)
	require.ErrorIs(t, err, sandbox.ErrNotReady)
	var notReady *sandbox.NotReadyError
	require.ErrorAs(t, err, &notReady)
	require.Equal(t, "server", notReady.Service)
	require.Equal(t, 7400, notReady.Port)
	require.Contains(t, notReady.Reason, "did not listen within 5s")
	require.Contains(t, notReady.Reason, "waiting for a model")
	entries, err := os.ReadDir(filepath.Join(opts.StateDir, "boxes"))
	require.NoError(t, err)
	require.Empty(t, entries, "the failed box is removed")
}
