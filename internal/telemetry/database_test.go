package telemetry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// TestWatchDatabaseCountsTheWaitsForAConnection holds a one-connection pool's only
// connection in a transaction while a second statement asks for one: the scrape
// shows the connection in use, the wait while it lasts, and its time once it ended.
func TestWatchDatabaseCountsTheWaitsForAConnection(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, time.Minute)
	_, dsn := testutil.NewDB(t)
	st, err := store.Open(ctx, dsn, testutil.Logger(t), store.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer st.Close()
	m := telemetry.NewMetrics(testutil.Logger(t))
	m.WatchDatabase(st.Pool())
	series := func(name string) float64 {
		families, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, metric := range f.GetMetric() {
				for _, label := range metric.GetLabel() {
					if label.GetName() == "db_name" && label.GetValue() == telemetry.DatabaseName {
						if c := metric.GetCounter(); c != nil {
							return c.GetValue()
						}
						return metric.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no %s{db_name=%q}", name, telemetry.DatabaseName)
		return 0
	}
	assert.Equal(t, 1.0, series("go_sql_max_open_connections"))
	assert.Zero(t, series("go_sql_wait_count_total"))

	held, release := make(chan struct{}), make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- st.InTx(ctx, func(*store.Store) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	pinged := make(chan error, 1)
	go func() { pinged <- st.Ping(ctx) }()
	// database/sql counts a wait when it begins.
	require.Eventually(t, func() bool { return series("go_sql_wait_count_total") == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1.0, series("go_sql_in_use_connections"))
	close(release)
	require.NoError(t, <-txDone)
	require.NoError(t, <-pinged)
	assert.Positive(t, series("go_sql_wait_duration_seconds_total"))
}
