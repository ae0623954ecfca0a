package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/pgcluster"
	"github.com/astrabox/astrabox/store"
)

// templateDB is the migrated database every test database is cloned from.
const templateDB = "astrabox_template"

const (
	// clusterDirPattern names the temp folders of test clusters.
	clusterDirPattern = "astrabox-test-pg-"
	// ownerFile holds the pid of the test process that started the cluster.
	ownerFile = "owner.pid"
)

// shared holds the per-process fixtures. It is package state on purpose: a test
// binary has one TestMain, and every test in it shares one cluster and one dev server
// that Main stops at the end.
var shared = &fixtures{}

type fixtures struct {
	pgOnce  sync.Once
	pgErr   error
	baseDir string
	cluster *pgcluster.Cluster
	// adminMu serialises CREATE/DROP DATABASE on the admin connection.
	adminMu sync.Mutex
	admin   *pgx.Conn

	temporal temporalFixture
}

// NewDB returns a Store on a fresh, migrated database of its own and that database's
// DSN. The database is dropped when the test ends. Under -short the test is skipped;
// otherwise a missing PostgreSQL installation fails it, naming `make deps`.
func NewDB(t testing.TB) (*store.Store, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL: skipped under -short")
	}
	ctx := Context(t)
	if err := shared.startPostgres(); err != nil {
		t.Fatalf("testutil: start postgresql: %v", err)
	}
	name := "t_" + randomHex(8)
	shared.adminMu.Lock()
	_, err := shared.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), templateDB))
	shared.adminMu.Unlock()
	if err != nil {
		t.Fatalf("testutil: create database %s: %v", name, err)
	}
	dsn := shared.cluster.DSN(name)
	st, err := store.Open(ctx, dsn, Logger(t))
	if err != nil {
		t.Fatalf("testutil: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = st.Close()
		dropCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared.adminMu.Lock()
		defer shared.adminMu.Unlock()
		if _, err := shared.admin.Exec(dropCtx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			t.Errorf("testutil: drop database %s: %v", name, err)
		}
	})
	return st, dsn
}

// startPostgres starts the process's cluster and migrates the template once.
func (f *fixtures) startPostgres() error {
	f.pgOnce.Do(func() { f.pgErr = f.bootPostgres() })
	return f.pgErr
}

func (f *fixtures) bootPostgres() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reapLeftoverClusters(ctx)
	base, err := os.MkdirTemp("", clusterDirPattern)
	if err != nil {
		return fmt.Errorf("make cluster folder: %w", err)
	}
	// Recorded so a later run can stop this cluster if this process dies first.
	if err := os.WriteFile(filepath.Join(base, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("record cluster owner: %w", err)
	}
	// The postgres system user must traverse this folder when tests run as root.
	if err := os.Chmod(base, 0o755); err != nil {
		return fmt.Errorf("chmod cluster folder: %w", err)
	}
	f.baseDir = base
	opts := pgcluster.Options{
		DataDir:   filepath.Join(base, "data"),
		SocketDir: filepath.Join(base, "run"),
		// Throwaway data: durability settings off for speed; enough connections for
		// parallel tests that each open a pool.
		Settings: map[string]string{
			"fsync":              "off",
			"synchronous_commit": "off",
			"full_page_writes":   "off",
			"max_connections":    "300",
			"shared_buffers":     "32MB",
		},
		Logger: zap.NewNop(),
	}
	f.cluster, err = pgcluster.StartOnFreePort(ctx, opts)
	if err != nil {
		return err
	}
	if err := f.cluster.CreateDatabase(ctx, templateDB); err != nil {
		return err
	}
	st, err := store.Open(ctx, f.cluster.DSN(templateDB), zap.NewNop())
	if err != nil {
		return err
	}
	_, err = st.MigrateUp(ctx)
	if closeErr := st.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	f.admin, err = pgx.Connect(ctx, f.cluster.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect admin: %w", err)
	}
	// No one connects to the template again, so cloning it never waits on a session.
	if _, err := f.admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH IS_TEMPLATE true ALLOW_CONNECTIONS false", templateDB)); err != nil {
		return fmt.Errorf("mark template: %w", err)
	}
	return nil
}

func (f *fixtures) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.temporal.stop()
	if f.admin != nil {
		_ = f.admin.Close(ctx)
	}
	if f.cluster != nil {
		if err := f.cluster.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		}
	}
	if f.baseDir != "" {
		_ = os.RemoveAll(f.baseDir)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// reapLeftoverClusters stops and removes test clusters whose test process died
// without stopping them (a crash, a timeout kill), so they do not pile up on a machine.
func reapLeftoverClusters(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterDirPattern+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || processAlive(pid) {
			continue
		}
		if err := pgcluster.StopDataDir(ctx, filepath.Join(dir, "data")); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
