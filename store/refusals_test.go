package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// inputFailedParts returns the input ids of the Session's data-input-failed parts with
// their codes, in log order.
func inputFailedParts(t *testing.T, f *fixture) [][2]string {
	t.Helper()
	parts, err := f.st.ListOutputPartsAfter(f.ctx, f.session.ID, 0, 1000)
	require.NoError(t, err)
	var out [][2]string
	for i, p := range parts {
		require.Equal(t, int64(i+1), p.Seq, "no gap")
		var fr struct {
			Type string `json:"type"`
			Data struct {
				InputID string `json:"input_id"`
				Code    string `json:"code"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(p.Frame, &fr))
		if fr.Type == "data-input-failed" {
			out = append(out, [2]string{fr.Data.InputID, fr.Data.Code})
		}
	}
	return out
}

// TestARefusalIsStreamedWithOrWithoutAReader: a refused input is reported on the
// stream in the transaction that records its failure, when no reader has ever held the
// lease and when one holds it; refusing it again writes nothing more.
func TestARefusalIsStreamedWithOrWithoutAReader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "a"})
	require.NoError(t, err)
	moved, err := f.st.FailInputReported(f.ctx, f.session.ID, a.ID, "REFUSED", "no")
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, [][2]string{{a.ID, "REFUSED"}}, inputFailedParts(t, f), "streamed with no reader")

	lease, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "reader", TTL: time.Minute})
	require.NoError(t, err)
	b, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "b"})
	require.NoError(t, err)
	_, err = f.st.FailInputReported(f.ctx, f.session.ID, b.ID, "REFUSED", "no")
	require.NoError(t, err)
	_, err = f.st.AppendParts(f.ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Parts: []store.NewPart{{Frame: json.RawMessage(`{"type":"start"}`)}}})
	require.NoError(t, err, "the reader keeps writing after the platform's part")
	moved, err = f.st.FailInputReported(f.ctx, f.session.ID, b.ID, "REFUSED", "again")
	require.NoError(t, err)
	require.False(t, moved)
	require.Equal(t, [][2]string{{a.ID, "REFUSED"}, {b.ID, "REFUSED"}}, inputFailedParts(t, f))
}

// TestHeldInputsRefusedByPreparationAreStreamed: failing the held inputs reports each
// on the stream, in accepted order.
func TestHeldInputsRefusedByPreparationAreStreamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "a"})
	require.NoError(t, err)
	b, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "b"})
	require.NoError(t, err)
	ids, err := f.st.FailHeldInputsReported(f.ctx, f.session.ID, store.InputFailurePreparationRefused, "profile disabled")
	require.NoError(t, err)
	require.Equal(t, []string{a.ID, b.ID}, ids)
	want := [][2]string{{a.ID, store.InputFailurePreparationRefused}, {b.ID, store.InputFailurePreparationRefused}}
	require.Equal(t, want, inputFailedParts(t, f))
	ids, err = f.st.FailHeldInputsReported(f.ctx, f.session.ID, store.InputFailurePreparationRefused, "again")
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Equal(t, want, inputFailedParts(t, f), "nothing twice")
}
