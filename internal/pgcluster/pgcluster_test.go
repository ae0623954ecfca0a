package pgcluster_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/pgcluster"
)

// testContext bounds a test's waits; the test's own deadline wins when it is sooner.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// baseDir returns a folder the postgres system user can traverse (t.TempDir is 0700).
func baseDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestStartCreateDatabaseAndReuseDataOnRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	base := baseDir(t)
	opts := pgcluster.Options{DataDir: filepath.Join(base, "data")}

	c, err := pgcluster.StartOnFreePort(ctx, opts)
	require.NoError(t, err)
	opts.Port = c.Port()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop(context.Background())
		}
	})
	require.NoError(t, c.CreateDatabase(ctx, "app"))
	require.NoError(t, c.CreateDatabase(ctx, "app"), "creating an existing database is a no-op")

	conn, err := pgx.Connect(ctx, c.DSN("app"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives restart')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	// A second start on the same data folder while it runs is refused clearly.
	_, err = pgcluster.Start(ctx, opts)
	var running *pgcluster.AlreadyRunningError
	require.ErrorAs(t, err, &running)
	require.Equal(t, opts.Port, running.Port)
	require.Contains(t, err.Error(), "already running")

	// Unless the caller asks to reuse it.
	reused, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: opts.DataDir, Port: opts.Port, ReuseRunning: true})
	require.NoError(t, err)
	require.Equal(t, c.DSN("app"), reused.DSN("app"))

	require.NoError(t, c.Stop(ctx))
	stopped = true
	_, err = pgx.Connect(ctx, c.DSN("app"))
	require.Error(t, err, "server must be down after Stop")

	c2, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	conn, err = pgx.Connect(ctx, c2.DSN("app"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "survives restart", v)
}

func TestStartRefusesPortInUse(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	base := baseDir(t)
	_, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(base, "data"), Port: port})
	var inUse *pgcluster.PortInUseError
	require.ErrorAs(t, err, &inUse)
	require.Equal(t, port, inUse.Port)
	require.Contains(t, err.Error(), "already in use")
	_, statErr := os.Stat(filepath.Join(base, "data", "PG_VERSION"))
	require.True(t, errors.Is(statErr, os.ErrNotExist), "nothing is initialised when the port is taken")
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := pgcluster.FindBinDir()
	require.NoError(t, err, "PostgreSQL server binaries are a prerequisite: run make deps")
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
	}
}

func TestStartValidatesOptions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, err := pgcluster.Start(ctx, pgcluster.Options{Port: 5432})
	require.ErrorContains(t, err, "DataDir is required")
	_, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: "x", Port: 0})
	require.ErrorContains(t, err, "invalid port")
}

func TestStopDataDirStopsALeftoverServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dataDir := filepath.Join(baseDir(t), "data")
	c, err := pgcluster.StartOnFreePort(ctx, pgcluster.Options{DataDir: dataDir})
	require.NoError(t, err)

	// As if the process that started it had died: stop it knowing only the folder.
	require.NoError(t, pgcluster.StopDataDir(ctx, dataDir))
	_, err = pgx.Connect(ctx, c.DSN("postgres"))
	require.Error(t, err, "server must be down")
	require.NoError(t, pgcluster.StopDataDir(ctx, dataDir), "nothing running is not an error")
}
