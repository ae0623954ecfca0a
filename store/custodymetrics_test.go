package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestCustodyAndAdmissionCounts: the custody summary counts held inputs and the oldest
// one's age, and a Relay batch reports how many inputs it admitted and parts it
// appended, an input admitted before not counted again.
func TestCustodyAndAdmissionCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	custody, err := st.GetCustody(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), custody.Held)
	require.Greater(t, custody.OldestAge, time.Duration(0))

	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	part := &store.NewPart{Frame: json.RawMessage(`{"type":"start"}`)}
	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{{AdmitInput: in.ID}, {Part: part}, {Part: part}}, Cursor: relayCursor(1)})
	require.NoError(t, err)
	require.Len(t, res.Admitted, 1)
	require.Greater(t, res.Admitted[0], time.Duration(0), "time in custody")
	require.Equal(t, int64(2), res.Parts)

	res, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{{AdmitInput: in.ID}}, Cursor: relayCursor(2)})
	require.NoError(t, err)
	require.Empty(t, res.Admitted, "already admitted")
	require.Equal(t, int64(0), res.Parts)

	custody, err = st.GetCustody(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Custody{}, custody, "nothing held: no age")
}
