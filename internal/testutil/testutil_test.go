package testutil_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestNewDBGivesEachTestItsOwnMigratedDatabase(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	a, dsnA := testutil.NewDB(t)
	b, dsnB := testutil.NewDB(t)
	require.NotEqual(t, dsnA, dsnB)

	_, err := a.CreateUser(ctx, store.NewUser{Email: "same@example.com"})
	require.NoError(t, err)
	_, err = b.CreateUser(ctx, store.NewUser{Email: "same@example.com"})
	require.NoError(t, err, "databases are independent")

	status, err := b.MigrationStatus(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)
	require.True(t, status[len(status)-1].Applied, "cloned from the migrated template")
}

func TestContextEndsBeforeTheTestDeadline(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, time.Minute)
	deadline, ok := ctx.Deadline()
	require.True(t, ok)
	require.LessOrEqual(t, time.Until(deadline), time.Minute)
}

func TestTemporalDevServer(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	server := testutil.TemporalDevServer(t)
	require.Same(t, server, testutil.TemporalDevServer(t), "one server per test process")
	_, err := server.Client().CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, server.FrontendHostPort())
}

func TestTemporalCLIPathExplainsAMissingBinary(t *testing.T) {
	t.Setenv("ASTRABOX_TEMPORAL_BIN", t.TempDir()+"/no-temporal")
	_, err := testutil.TemporalCLIPath()
	require.ErrorContains(t, err, "make deps")
}
