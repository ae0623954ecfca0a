package store_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestInsertInputIdempotentUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	cmid := uniq("msg")

	const callers = 50
	type result struct {
		in  store.Input
		dup bool
	}
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			in, dup, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, ClientMessageID: &cmid, Content: "hello " + string(rune('a'+i%26))})
			if assertNoError(t, err) {
				results <- result{in, dup}
			}
		})
	}
	wg.Wait()
	close(results)
	require.Len(t, results, callers)
	fresh, firstID := 0, ""
	for r := range results {
		if !r.dup {
			fresh++
		}
		if firstID == "" {
			firstID = r.in.ID
		}
		require.Equal(t, firstID, r.in.ID, "every caller sees the same input")
	}
	require.Equal(t, 1, fresh, "exactly one caller created it; all others see duplicate")

	all, err := st.ListInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, store.InputPending, all[0].State)
	require.Equal(t, int64(1), all[0].Seq)
}

func TestInsertInputOrdersWithoutGaps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	const callers = 20
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			var cmid *string
			if i%2 == 0 {
				cmid = ptr(uniq("m"))
			}
			_, dup, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, ClientMessageID: cmid, Content: "x"})
			if assertNoError(t, err) && dup {
				t.Errorf("distinct inputs reported duplicate")
			}
		})
	}
	wg.Wait()
	all, err := st.ListInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, all, callers)
	for i, in := range all {
		require.Equal(t, int64(i+1), in.Seq)
	}
	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(callers), s.InputSeq)

	_, _, err = st.InsertInput(ctx, store.NewInput{SessionID: "00000000-0000-0000-0000-000000000000", Content: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRepeatedClientMessageIDLeavesNoGap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	cmid := uniq("m")
	first, dup, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, ClientMessageID: &cmid, Content: "one"})
	require.NoError(t, err)
	require.False(t, dup)
	again, dup, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, ClientMessageID: &cmid, Content: "one, again"})
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, first, again, "the first input, as stored")
	next, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "two"})
	require.NoError(t, err)
	require.Equal(t, int64(2), next.Seq, "the refused repeat took no seq")
	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.InputSeq)
}
