package testutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/internal/temporaldev"
)

// temporalFixture is the process's Temporal dev server, started on first use.
type temporalFixture struct {
	once   sync.Once
	err    error
	server *Temporal
}

// Temporal is the test process's Temporal dev server: the pinned CLI's, on a
// SQLite file in a temporary folder, supervised as the dev stack's is, so a
// server whose store stops answering is restarted on the same file (the tests
// in flight see a Temporal restart, which the platform survives) instead of
// failing every test after it.
type Temporal struct {
	server   *temporaldev.Server
	hostPort string
	client   client.Client
	dir      string
}

// FrontendHostPort is the frontend's host:port.
func (t *Temporal) FrontendHostPort() string { return t.hostPort }

// Client is a client of the default namespace, shared by the process's tests.
func (t *Temporal) Client() client.Client { return t.client }

// TemporalDevServer returns the test process's Temporal dev server (the official CLI
// from ASTRABOX_TEMPORAL_BIN or <repo>/bin/temporal), started on first use on a free
// port. The test fails clearly when the CLI is missing, and is skipped under -short.
func TemporalDevServer(t testing.TB) *Temporal {
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

func startTemporal() (_ *Temporal, err error) {
	path, err := TemporalCLIPath()
	if err != nil {
		return nil, err
	}
	port, err := freeport.Reserve()
	if err != nil {
		return nil, fmt.Errorf("temporal dev server port: %w", err)
	}
	dir, err := os.MkdirTemp("", "astrabox-test-temporal-")
	if err != nil {
		return nil, fmt.Errorf("temporal dev server folder: %w", err)
	}
	tp := &Temporal{hostPort: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	defer func() {
		if err != nil {
			tp.stop()
		}
	}()
	args := append([]string{"--namespace", "default", "--dynamic-config-value", "frontend.enableServerVersionCheck=false"}, searchAttributeArgs()...)
	tp.server, err = temporaldev.Start(temporaldev.Options{
		Binary: path, Port: port, DBFile: filepath.Join(dir, "temporal.db"),
		LogLevel: "error", ExtraArgs: args, // its errors go to the test's standard error
	}, supervisorLog())
	if err != nil {
		return nil, fmt.Errorf("start temporal dev server from %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tp.server.WaitServing(ctx); err != nil {
		return nil, err
	}
	if tp.client, err = client.DialContext(ctx, client.Options{HostPort: tp.hostPort, Namespace: "default",
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}); err != nil {
		return nil, fmt.Errorf("dial temporal dev server: %w", err)
	}
	return tp, nil
}

// supervisorLog reports the supervisor's restarts on standard error.
func supervisorLog() *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zap.WarnLevel)).Named("testutil.temporal")
}

func (t *Temporal) stop() {
	if t.client != nil {
		t.client.Close()
	}
	if t.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := t.server.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: stop temporal dev server: %v\n", err)
		}
	}
	if err := os.RemoveAll(t.dir); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: remove temporal dev server folder: %v\n", err)
	}
}

func (f *temporalFixture) stop() {
	if f.server != nil {
		f.server.stop()
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

// searchAttributeArgs registers the custom search attributes Session workflows upsert
// (as the dev stack does), so workflows that set them run on the test server too.
func searchAttributeArgs() []string {
	var args []string
	for _, name := range []string{"AstraboxSessionId", "AstraboxAgentId", "AstraboxSessionState", "AstraboxEngineKind"} {
		args = append(args, "--search-attribute", name+"=Keyword")
	}
	return args
}
