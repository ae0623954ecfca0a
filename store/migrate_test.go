package store_test

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

func tableExists(t *testing.T, st *store.Store, name string) bool {
	t.Helper()
	ok, err := store.TableExists(testutil.Context(t), st, name)
	require.NoError(t, err)
	return ok
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	st, _ := testutil.NewDB(t)
	ctx := testutil.Context(t)

	status, err := st.MigrationStatus(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)
	for _, s := range status {
		require.True(t, s.Applied, "version %d applied in the template", s.Version)
		require.False(t, s.Modified)
		require.NotNil(t, s.AppliedAt)
	}
	require.Equal(t, int64(1), status[0].Version)
	require.Equal(t, "init", status[0].Name)
	require.True(t, tableExists(t, st, "output_parts"))

	applied, err := st.MigrateUp(ctx)
	require.NoError(t, err)
	require.Empty(t, applied, "nothing pending")

	// One step reverts only the newest migration.
	newest := status[len(status)-1].Version
	reverted, err := st.MigrateDown(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{newest}, reverted)
	require.True(t, tableExists(t, st, "sessions"))
	status, err = st.MigrationStatus(ctx)
	require.NoError(t, err)
	require.False(t, status[len(status)-1].Applied)

	reverted, err = st.MigrateDown(ctx, len(status))
	require.NoError(t, err)
	require.Len(t, reverted, len(status)-1)
	require.False(t, tableExists(t, st, "output_parts"))
	require.False(t, tableExists(t, st, "sessions"))
	status, err = st.MigrationStatus(ctx)
	require.NoError(t, err)
	for _, s := range status {
		require.False(t, s.Applied)
	}

	applied, err = st.MigrateUp(ctx)
	require.NoError(t, err)
	require.Len(t, applied, len(status))
	require.True(t, tableExists(t, st, "output_parts"))
}

func TestMigratorStepsStatusAndConcurrentUp(t *testing.T) {
	t.Parallel()
	st, _ := testutil.NewDB(t)
	ctx := testutil.Context(t)
	fsys := fstest.MapFS{
		"0001_one.up.sql":   {Data: []byte("CREATE TABLE m_one (id int); CREATE TABLE m_one_b (id int);")},
		"0001_one.down.sql": {Data: []byte("DROP TABLE m_one; DROP TABLE m_one_b;")},
		"0002_two.up.sql":   {Data: []byte("CREATE TABLE m_two (id int);")},
		"0002_two.down.sql": {Data: []byte("DROP TABLE m_two;")},
	}
	// The template already recorded version 1 ("init"); use a clean schema_migrations.
	require.NoError(t, store.ExecForTest(ctx, st, "DROP TABLE schema_migrations"))

	m, err := store.NewMigrator(st, fsys)
	require.NoError(t, err)
	// Two runners at once apply each migration once: the advisory lock serialises them.
	results := make(chan []int64, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			applied, err := m.Up(ctx)
			results <- applied
			errs <- err
		}()
	}
	var total int
	for range 2 {
		require.NoError(t, <-errs)
		total += len(<-results)
	}
	require.Equal(t, 2, total)
	require.True(t, tableExists(t, st, "m_one_b"), "a file may hold several statements")

	reverted, err := m.Down(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, reverted)
	require.False(t, tableExists(t, st, "m_two"))
	require.True(t, tableExists(t, st, "m_one"))

	status, err := m.Status(ctx)
	require.NoError(t, err)
	require.Len(t, status, 2)
	require.True(t, status[0].Applied)
	require.False(t, status[1].Applied)

	// A changed file is reported as modified.
	fsys["0001_one.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE m_one (id bigint);")}
	m2, err := store.NewMigrator(st, fsys)
	require.NoError(t, err)
	status, err = m2.Status(ctx)
	require.NoError(t, err)
	require.True(t, status[0].Modified)

	_, err = m.Down(ctx, 0)
	require.Error(t, err)
}

func TestLoadMigrationsRejectsBadFiles(t *testing.T) {
	t.Parallel()
	_, err := store.LoadMigrations(fstest.MapFS{"0001_x.up.sql": {Data: []byte("SELECT 1")}})
	require.ErrorContains(t, err, "needs both")
	_, err = store.LoadMigrations(fstest.MapFS{"init.sql": {Data: []byte("SELECT 1")}})
	require.ErrorContains(t, err, "want NNNN_name")
}

// Migration 0017 moves each Session's output position to session_outputs and back
// without losing it: a Session with output keeps its position through a down and an
// up, and its Relays write on from it.
func TestTheOutputPositionMovesToItsOwnRowAndBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	require.NoError(t, store.ExecForTest(ctx, st,
		`UPDATE session_outputs SET output_seq = 7, last_output_at = '2026-01-02T03:04:05Z' WHERE session_id = ?`, f.session.ID))

	status, err := st.MigrationStatus(ctx)
	require.NoError(t, err)
	after := 0
	for _, s := range status {
		if s.Version >= 17 {
			after++
		}
	}
	_, err = st.MigrateDown(ctx, after)
	require.NoError(t, err)
	var outputSeq int64
	var lastOutputAt time.Time
	require.NoError(t, store.QueryRowForTest(ctx, st, `SELECT output_seq, last_output_at FROM sessions WHERE id = $1`, f.session.ID, &outputSeq, &lastOutputAt))
	require.Equal(t, int64(7), outputSeq)
	require.True(t, lastOutputAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))

	_, err = st.MigrateUp(ctx)
	require.NoError(t, err)
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), sess.OutputSeq)
	require.NotNil(t, sess.LastOutputAt)
	require.True(t, sess.LastOutputAt.Equal(lastOutputAt))
	require.False(t, sess.UpdatedAt.Before(lastOutputAt), "a Session's updated_at is never before its last output")

	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)
	res, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Parts: []store.NewPart{textPart("r1", "on from the position")}})
	require.NoError(t, err)
	require.Equal(t, int64(8), res.FirstSeq)
}
