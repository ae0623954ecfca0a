package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestInputCustodyMovesOnlyForward(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	var ids []string
	for range 4 {
		in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "m"})
		require.NoError(t, err)
		ids = append(ids, in.ID)
	}

	moved, err := st.MarkInputDelivered(ctx, f.session.ID, ids[0])
	require.NoError(t, err)
	require.True(t, moved)
	n, err := st.MarkInputsAdmitted(ctx, f.session.ID, []string{ids[0], ids[1]})
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "pending and delivered inputs are admitted alike")
	moved, err = st.MarkInputFailed(ctx, f.session.ID, ids[2], "ADMISSION_DENIED", "refused by policy")
	require.NoError(t, err)
	require.True(t, moved)

	// Late or repeated receipts never move an input back.
	moved, err = st.MarkInputDelivered(ctx, f.session.ID, ids[0])
	require.NoError(t, err)
	require.False(t, moved)
	moved, err = st.MarkInputFailed(ctx, f.session.ID, ids[1], "X", "too late")
	require.NoError(t, err)
	require.False(t, moved, "an admitted input never fails")
	n, err = st.MarkInputsAdmitted(ctx, f.session.ID, []string{ids[0], ids[2]})
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = st.MarkInputDelivered(ctx, f.session.ID, "00000000-0000-0000-0000-000000000000")
	require.ErrorIs(t, err, store.ErrNotFound)

	held, err := st.ListHeldInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, ids[3], held[0].ID)

	all, err := st.ListInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, all[0].State)
	require.NotNil(t, all[0].AdmittedAt)
	require.Equal(t, store.InputFailed, all[2].State)
	require.Equal(t, "ADMISSION_DENIED", *all[2].FailureCode)
}

func TestLeaseTxFencesEveryReaderWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "m"})
	require.NoError(t, err)
	old, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "old", TTL: time.Minute})
	require.NoError(t, err)
	_, err = st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "new", TTL: time.Minute, Steal: true})
	require.NoError(t, err)

	ran := false
	err = st.InLeaseTx(ctx, f.session.ID, old.Generation, func(tx *store.Store) error {
		ran = true
		_, err := tx.MarkInputsAdmitted(ctx, f.session.ID, []string{in.ID})
		return err
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.False(t, ran, "a zombie's closure never runs")
	held, err := st.ListHeldInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, held, 1)
}
