package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestRuntimeDiagnosticsAreBoundedOldestDroppedFirst: diagnostics recorded with the
// Relay's batches are kept per Session in order, up to the bound, the oldest going
// first; evidence that is not JSON is kept as a string.
func TestRuntimeDiagnosticsAreBoundedOldestDroppedFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	const keep = 3
	for i := 1; i <= 5; i++ {
		_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{
			SessionID: f.session.ID, LeaseGeneration: lease.Generation,
			Ops: []store.RelayOp{{Diagnostic: &store.DiagnosticRecord{
				EventType: "unparsed_stdout", Raw: json.RawMessage(fmt.Sprintf(`{"line":%d}`, i)), Keep: keep,
			}}},
			Cursor: relayCursor(i),
		})
		require.NoError(t, err)
	}
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops:    []store.RelayOp{{Diagnostic: &store.DiagnosticRecord{EventType: "stderr", Raw: json.RawMessage("not json"), Keep: keep}}},
		Cursor: relayCursor(6),
	})
	require.NoError(t, err)

	got, err := st.ListRuntimeDiagnostics(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, got, keep)
	require.Equal(t, []int64{4, 5, 6}, []int64{got[0].Seq, got[1].Seq, got[2].Seq})
	require.JSONEq(t, `{"line":4}`, string(got[0].Raw))
	require.JSONEq(t, `"not json"`, string(got[2].Raw))
	require.Equal(t, "stderr", got[2].EventType)
	parts, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 100)
	require.NoError(t, err)
	require.Empty(t, parts, "a diagnostic never becomes a browser part")
}
