package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestScanRawScansAsGORMsScanDoes: a slice takes every row, a struct and a scalar
// the first, no row leaves the destination as it was, and a failed statement is an
// error.
func TestScanRawScansAsGORMsScanDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	type row struct {
		N     int64
		Label string
	}
	const series = `SELECT n, 'row ' || n AS label FROM generate_series(1, ?) AS n`

	var rows []row
	require.NoError(t, store.ScanRawForTest(ctx, st, &rows, series, 3))
	require.Equal(t, []row{{1, "row 1"}, {2, "row 2"}, {3, "row 3"}}, rows)

	var first row
	require.NoError(t, store.ScanRawForTest(ctx, st, &first, series, 3))
	require.Equal(t, row{1, "row 1"}, first)

	var n int64
	require.NoError(t, store.ScanRawForTest(ctx, st, &n, `SELECT count(*) FROM generate_series(1, ?)`, 4))
	require.Equal(t, int64(4), n)

	kept, none := row{7, "kept"}, []row(nil)
	require.NoError(t, store.ScanRawForTest(ctx, st, &kept, series, 0))
	require.NoError(t, store.ScanRawForTest(ctx, st, &none, series, 0))
	require.Equal(t, row{7, "kept"}, kept)
	require.Nil(t, none)

	require.Error(t, store.ScanRawForTest(ctx, st, &rows, `SELECT no_such_column FROM sessions`))
}

// TestRelayBatchesAreNotRenderedForALoggerThatDoesNotLog: GORM renders a statement
// with its arguments inlined only for a logger that asks; a Relay's batches (whose
// frames are one of the arguments) and the reads around them never ask it to when
// nothing is logged.
func TestRelayBatchesAreNotRenderedForALoggerThatDoesNotLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay", TTL: time.Minute})
	require.NoError(t, err)
	reason := "end_turn"
	rendered := store.CountRenderedStatements(st)

	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{
		{AdmitInput: in.ID},
		{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input", InputIDs: []string{in.ID}}},
		part("r1", `{"type":"start","messageId":"r1"}`),
	}, Cursor: relayCursor(1)})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{
		part("r1", `{"type":"text-delta","id":"t","delta":"hi"}`),
	}, Cursor: relayCursor(2)})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{
		part("r1", `{"type":"finish"}`),
		{EndResponse: &store.ResponseEnd{ResponseID: "r1", Outcome: store.OutcomeCompleted, NativeReason: &reason}},
	}, Cursor: relayCursor(3)})
	require.NoError(t, err)
	_, err = st.GetSessionFactsByID(ctx, f.session.ID)
	require.NoError(t, err)
	_, err = st.StreamPositionAt(ctx, f.session.ID, 1)
	require.NoError(t, err)

	require.Zero(t, rendered.Load(), "statements rendered with their arguments for nothing")
}
