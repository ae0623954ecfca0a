// Package localtest gives tests in any package real local boxes: it builds the
// in-box runner once per test process (into boxroot's folder, whose leak check
// testutil.Main runs), hands each test a uid block no other
// test process on the machine holds (go test runs packages in parallel), and
// destroys every box the test made.
package localtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testutil/boxroot"
	"github.com/astrabox/astrabox/sandbox/local"
)

const (
	// uidFirst is above the ranges the sandbox/local package's own tests use.
	uidFirst  = 400000
	blockSize = 100
	blocks    = 500
)

// Runner builds (once per test process) and returns the astrabox-runner binary.
// It fails the test when the build fails.
func Runner(t testing.TB) string {
	t.Helper()
	path, err := runner()
	if err != nil {
		t.Fatalf("build astrabox-runner: %v", err)
	}
	return path
}

// runner builds into the process's box folder, which the package's TestMain
// removes (testutil.Main), so no runner folder outlives the test run.
var runner = sync.OnceValues(func() (string, error) {
	dir, err := boxroot.BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "astrabox-runner")
	build := exec.Command("go", "build", "-trimpath", "-o", path, "github.com/astrabox/astrabox/cmd/astrabox-runner")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return path, nil
})

// RequireBoxes fails the test (skips it under -short) when this machine cannot
// run boxes: they need root and bubblewrap, as `make deps` and CI provide.
func RequireBoxes(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("bwrap")
	if os.Getuid() == 0 && err == nil {
		return
	}
	if testing.Short() {
		t.Skip("needs root and bubblewrap")
	}
	t.Fatalf("box tests need root and bubblewrap (make deps installs it): uid=%d, bwrap: %v", os.Getuid(), err)
}

// Options returns backend options with a short state dir of the test's own, in
// the process's box folder that testutil.Main checks for leaks, and a uid block
// held for the test's life.
func Options(t testing.TB) local.Options {
	t.Helper()
	RequireBoxes(t)
	dir, err := boxroot.StateDir()
	if err != nil {
		t.Fatalf("state dir: %v", err)
	}
	first, release, err := takeUIDBlock()
	if err != nil {
		t.Fatalf("uid block: %v", err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(dir)
		release()
	})
	return local.Options{
		StateDir:     dir,
		RunnerPath:   Runner(t),
		UIDFirst:     first,
		UIDCount:     blockSize,
		ReadyTimeout: 30 * time.Second,
	}
}

// NewBackend starts a backend from opts and destroys every box it made when the
// test ends.
func NewBackend(t testing.TB, opts local.Options) *local.Backend {
	t.Helper()
	b, err := local.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("start local backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := b.Reap(ctx, func(string) bool { return false }); err != nil {
			t.Errorf("destroy test boxes: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

// UIDBlock holds a block of box uids no other test process on the machine
// holds, for harnesses that run the local backend in another process (the
// fault stack's worker) and so cannot use Options. It returns the first uid,
// the block's size and the release of the hold.
func UIDBlock() (first, count int, release func(), err error) {
	first, release, err = takeUIDBlock()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("uid block: %w", err)
	}
	return first, blockSize, release, nil
}

// takeUIDBlock locks the first free block with flock on a file per block, so
// concurrent test processes never share accounts; the lock drops with the
// process even after a crash.
func takeUIDBlock() (int, func(), error) {
	dir := filepath.Join(os.TempDir(), "astrabox-uid-blocks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	for i := range blocks {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			continue
		}
		if err != nil {
			f.Close()
			return 0, nil, err
		}
		return uidFirst + i*blockSize, func() { f.Close() }, nil
	}
	return 0, nil, errors.New("every uid block is taken")
}
