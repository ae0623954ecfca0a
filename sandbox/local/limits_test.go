package local

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

// TestLimitsTheMachineCannotGrantAreRefused: a box is never started unbounded
// or promised more than the machine has; the error says what to change.
func TestLimitsTheMachineCannotGrantAreRefused(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	b := newBackend(t, opts)
	ctx := testContext(t)
	total, ok := memTotal()
	require.True(t, ok)
	for want, limits := range map[string]sandbox.Limits{
		"cores":              {CPUMillis: int64(runtime.NumCPU()+1) * 1000},
		"MiB":                {MemoryBytes: total + 1<<30},
		"needs to start":     {MemoryBytes: 1 << 20},
		"a box needs":        {Pids: 2},
		"cannot be enforced": {WorkspaceBytes: 1 << 30},
	} {
		_, err := b.Create(ctx, sandbox.Spec{Limits: limits})
		require.ErrorIs(t, err, sandbox.ErrInvalidSpec, want)
		require.Contains(t, err.Error(), want)
	}

	// Without cgroups a limit cannot be enforced: refused, not ignored.
	opts2 := testOptions(t)
	opts2.CgroupRoot = t.TempDir()
	bare := newBackend(t, opts2)
	_, err := bare.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 256 << 20}})
	require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
	require.Contains(t, err.Error(), "no usable memory cgroup controller")

	for _, dir := range []string{opts.StateDir, opts2.StateDir} {
		entries, err := os.ReadDir(filepath.Join(dir, "boxes"))
		require.NoError(t, err)
		require.Empty(t, entries, "nothing was started")
	}
}

// TestMemoryHogAndForkBombAreContained runs a memory hog and a fork bomb in a
// real box: the kernel kills the hog inside the box's memory limit (the runner
// survives and reports the kill), the bomb hits the pids limit, and the
// platform stays up: the box is destroyed cleanly and the next box works.
func TestMemoryHogAndForkBombAreContained(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 96 << 20, Pids: 64}})
	require.NoError(t, err)
	cgroupFile := func(ctrl, file string) string {
		raw, err := os.ReadFile(filepath.Join(b.cg.dir(ctrl, h.ID()), file))
		require.NoError(t, err)
		return string(raw)
	}

	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "hog", Argv: []string{"/usr/bin/perl", "-e",
		`my @chunks; push @chunks, "x" x (16 << 20) for 1 .. 64; print "survived\n"`}})
	require.NoError(t, err)
	st, err := h.Wait(ctx, "hog")
	require.NoError(t, err)
	require.Equal(t, "SIGKILL", st.Exit.Signal, "the hog is killed, exit %+v", st.Exit)
	require.Regexp(t, `oom_kill [1-9]`, cgroupFile("memory", oomEventsFile(b)), "the kill was the box's own")
	require.Equal(t, "alive\n", string(sh(t, h, "echo alive").Stdout), "the runner survives the hog")

	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "bomb", Argv: []string{"/bin/sh", "-c", `b() { b | b & }; b; wait`}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		max, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(cgroupFile("pids", "pids.events")), "max "))
		return max > 0
	}, 30*time.Second, 20*time.Millisecond, "the bomb reaches the pids limit")
	require.LessOrEqual(t, atoi(t, cgroupFile("pids", "pids.current")), int64(64))
	// The runner may answer or have been starved of threads; either way the box
	// is either running or reported lost, never hung.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = h.Process(pctx, "bomb")
	cancel()
	if err != nil {
		select {
		case d := <-deaths:
			t.Logf("the bomb cost the box its runner: %s: %s", d.Reason, d.Message)
		default:
			t.Logf("the runner did not answer during the bomb: %v", err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, b.Destroy(dctx, h.ID()))
	_, err = os.Stat(b.cg.dir("pids", h.ID()))
	require.ErrorIs(t, err, os.ErrNotExist, "the box's cgroups are gone")

	next, err := b.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 96 << 20, Pids: 64}})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(sh(t, next, "echo ok").Stdout))
}

// oomEventsFile is where the memory controller counts its kills.
func oomEventsFile(b *Backend) string {
	if b.cg.v2 {
		return "memory.events"
	}
	return "memory.oom_control"
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	require.NoError(t, err)
	return n
}
