package testutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
)

// temporalFixture is the process's Temporal dev server, started on first use.
type temporalFixture struct {
	once   sync.Once
	err    error
	server *testsuite.DevServer
}

// TemporalDevServer returns the test process's Temporal dev server (the official CLI
// from ASTRABOX_TEMPORAL_BIN or <repo>/bin/temporal), started on first use on a free
// port with an in-memory database. The test fails clearly when the CLI is missing,
// and is skipped under -short.
func TemporalDevServer(t testing.TB) *testsuite.DevServer {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Temporal dev server: skipped under -short")
	}
	f := &shared.temporal
	f.once.Do(func() { f.server, f.err = startTemporal() })
	if f.err != nil {
		t.Fatalf("testutil: %v", f.err)
	}
	return f.server
}

// TemporalCLIPath locates the Temporal CLI: $ASTRABOX_TEMPORAL_BIN, else bin/temporal
// under $ASTRABOX_REPO_ROOT or the module root found from the working folder.
func TemporalCLIPath() (string, error) {
	if p := os.Getenv("ASTRABOX_TEMPORAL_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("temporal CLI at ASTRABOX_TEMPORAL_BIN=%s: %w (run `make deps`)", p, err)
		}
		return p, nil
	}
	root := os.Getenv("ASTRABOX_REPO_ROOT")
	if root == "" {
		var err error
		if root, err = moduleRoot(); err != nil {
			return "", err
		}
	}
	p := filepath.Join(root, "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("temporal CLI not found at %s: run `make deps` to build it, or set ASTRABOX_TEMPORAL_BIN", p)
	}
	return p, nil
}

func startTemporal() (*testsuite.DevServer, error) {
	path, err := TemporalCLIPath()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: path,
		LogLevel:     "error",
		Stdout:       io.Discard,
		Stderr:       os.Stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("start temporal dev server from %s: %w", path, err)
	}
	return server, nil
}

func (f *temporalFixture) stop() {
	if f.server != nil {
		if err := f.server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: stop temporal dev server: %v\n", err)
		}
	}
}

// moduleRoot walks up from the working folder to the folder holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working folder; set ASTRABOX_REPO_ROOT")
		}
		dir = parent
	}
}
