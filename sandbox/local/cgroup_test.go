package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
)

// unifiedRoot returns a cgroup v2 hierarchy of this machine: /sys/fs/cgroup on a
// v2 host, else the hybrid layout's /sys/fs/cgroup/unified (v1 keeps the
// controllers there, so it offers the freezer and placement, not limits).
func unifiedRoot(t *testing.T) string {
	t.Helper()
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
			return root
		}
	}
	t.Skip("this machine has no cgroup v2 hierarchy")
	return ""
}

// TestCgroupV2PlacesPausesAndLimits runs boxes on a cgroup v2 hierarchy: the
// launcher clones bubblewrap straight into the box's cgroup and stays out of
// it, pause uses cgroup.freeze, and a limit is enforced where the hierarchy
// has the controller, refused where it has not.
func TestCgroupV2PlacesPausesAndLimits(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.CgroupRoot = unifiedRoot(t)
	b := newBackend(t, opts)
	require.True(t, b.cg.v2)
	ctx := testContext(t)
	h, err := b.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	rec := mustRecord(t, b, h.ID())
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", rec.InitPID))
	require.NoError(t, err)
	require.Contains(t, string(raw), "0::/"+b.opts.CgroupParent+"/"+h.ID()+"\n", "the box runs in its v2 cgroup")
	requireLauncherOutside(t, b, rec)
	require.NoError(t, b.Destroy(ctx, h.ID()))

	memory := sandbox.Limits{MemoryBytes: 256 << 20}
	if b.cg.have["memory"] {
		h, err = b.Create(ctx, sandbox.Spec{Limits: memory})
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(b.cg.dir("memory", h.ID()), "memory.max"))
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(256<<20), strings.TrimSpace(string(got)))
		require.NoError(t, b.Destroy(ctx, h.ID()))
	} else {
		_, err := b.Create(ctx, sandbox.Spec{Limits: memory})
		require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
		require.Contains(t, err.Error(), "no usable memory cgroup controller")
	}
	require.NoError(t, b.Close())

	// Frozen tasks of cgroup v2 sleep in the kernel's freezer, interruptibly.
	testPauseResume(t, opts, "S")
}

// TestLauncherStaysOutOfTheBoxCgroups: on cgroup v1 the launcher joins the
// box's groups only to start bubblewrap in them, then leaves, so it costs the
// box none of its pids or memory.
func TestLauncherStaysOutOfTheBoxCgroups(t *testing.T) {
	t.Parallel()
	b := newBackend(t, testOptions(t))
	require.False(t, b.cg.v2, "the project's machines use cgroup v1 by default")
	h, err := b.Create(testContext(t), sandbox.Spec{Limits: sandbox.Limits{Pids: 64}})
	require.NoError(t, err)
	requireLauncherOutside(t, b, mustRecord(t, b, h.ID()))
}

// TestCloseRemovesTheParentCgroupsNoBoxIsIn: a backend leaves no cgroup of its own
// behind once its boxes are gone, but a box that outlives it keeps its parent for
// the backend that adopts it.
func TestCloseRemovesTheParentCgroupsNoBoxIsIn(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	ctx := testContext(t)
	first, err := New(ctx, opts)
	require.NoError(t, err)
	parents := first.cg.parents()
	require.NotEmpty(t, parents, "the machine's cgroup controllers are used")
	h, err := first.Create(ctx, sandbox.Spec{})
	require.NoError(t, err)
	require.NoError(t, h.Close())
	require.NoError(t, first.Close())
	for _, dir := range parents {
		require.DirExists(t, dir, "a live box's parent stays")
	}

	adopter := newBackend(t, opts)
	require.NoError(t, adopter.Destroy(ctx, h.ID()))
	require.NoError(t, adopter.Close())
	for _, dir := range parents {
		require.NoDirExists(t, dir, "no box is left in it")
	}
}

// requireLauncherOutside checks that the box's cgroups hold its init but not
// the launcher that started it.
func requireLauncherOutside(t *testing.T, b *Backend, rec record) {
	t.Helper()
	for _, dir := range b.cg.dirs(rec.ID) {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		require.NoError(t, err)
		procs := strings.Fields(string(raw))
		require.Contains(t, procs, strconv.Itoa(rec.InitPID), dir)
		require.NotContains(t, procs, strconv.Itoa(rec.BwrapPID), "the launcher left %s", dir)
	}
}
