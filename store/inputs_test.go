package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
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

// An input is left to the Relay (no workflow signal) only while the Relay that said
// it listens holds the Session's unexpired lease and the runtime is not released.
func TestAnInputIsLeftToTheRelayOnlyWhileItsLeaseListens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st, id := f.ctx, f.st, f.session.ID
	listens := func() bool {
		t.Helper()
		a, err := st.AcceptInput(ctx, store.NewInput{SessionID: id, Content: "hello"})
		require.NoError(t, err)
		require.False(t, a.Duplicate)
		return a.RelayListens
	}
	lease := func(steal bool) int64 {
		t.Helper()
		l, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: id, Holder: uniq("relay"), TTL: time.Minute, Steal: steal})
		require.NoError(t, err)
		return l.Generation
	}
	_, err := st.SetSessionPlacement(ctx, store.Placement{SessionID: id, SandboxID: "box-1", HostTaskQueue: "host-a"})
	require.NoError(t, err)

	require.False(t, listens(), "no Relay listens yet")
	first := lease(false)
	require.False(t, listens(), "a Relay that holds the lease but has not said it listens")
	require.NoError(t, st.SetInputsOnNotice(ctx, id, first))
	require.True(t, listens())

	second := lease(true)
	require.False(t, listens(), "a new lease voids the record of the one before")
	require.ErrorIs(t, st.SetInputsOnNotice(ctx, id, first), store.ErrLeaseLost, "a superseded Relay records nothing")
	require.False(t, listens())
	require.NoError(t, st.SetInputsOnNotice(ctx, id, second))
	require.True(t, listens())

	require.NoError(t, store.ExecForTest(ctx, st, `UPDATE reader_leases SET expires_at = now() - interval '1 second' WHERE session_id = ?`, id))
	require.False(t, listens(), "an expired lease's Relay may be dead")
	renewed, err := st.RenewReaderLeases(ctx, []store.LeaseRef{{SessionID: id, Generation: second}}, time.Minute)
	require.NoError(t, err)
	require.Len(t, renewed, 1)
	require.True(t, listens())

	require.NoError(t, st.ClearInputsOnNotice(ctx, id, first))
	require.True(t, listens(), "a superseded Relay cannot clear its successor's record")
	require.NoError(t, st.ClearInputsOnNotice(ctx, id, second))
	require.False(t, listens())
	require.NoError(t, st.SetInputsOnNotice(ctx, id, second))

	held, err := st.CountHeldInputs(ctx, id)
	require.NoError(t, err)
	heldOnNotice, err := st.ReleaseSessionRuntime(ctx, id)
	require.NoError(t, err)
	require.Equal(t, held, heldOnNotice, "a release while a Relay listened reports the held inputs")
	require.False(t, listens(), "a released runtime has no Relay")
	require.ErrorIs(t, st.SetInputsOnNotice(ctx, id, second), store.ErrLeaseLost, "a Relay still ending after the release records nothing")
	heldOnNotice, err = st.ReleaseSessionRuntime(ctx, id)
	require.NoError(t, err)
	require.Zero(t, heldOnNotice, "every input since was signalled")
}

// An input accepted while the runtime is released is either seen as left to the
// Relay and counted by the release, or seen as not left to it: none falls between.
func TestAReleaseCountsEveryInputLeftToTheRelay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st, id := f.ctx, f.st, f.session.ID
	_, err := st.SetSessionPlacement(ctx, store.Placement{SessionID: id, SandboxID: "box-1", HostTaskQueue: "host-a"})
	require.NoError(t, err)
	l, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: id, Holder: "relay", TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, st.SetInputsOnNotice(ctx, id, l.Generation))

	const callers = 40
	var leftToRelay sync.WaitGroup
	var mu sync.Mutex
	onNotice := 0
	release := make(chan int, 1)
	for i := range callers {
		leftToRelay.Go(func() {
			if i == callers/2 {
				n, err := st.ReleaseSessionRuntime(ctx, id)
				if assertNoError(t, err) {
					release <- n
				}
			}
			a, err := st.AcceptInput(ctx, store.NewInput{SessionID: id, Content: "hello"})
			if assertNoError(t, err) && a.RelayListens {
				mu.Lock()
				onNotice++
				mu.Unlock()
			}
		})
	}
	leftToRelay.Wait()
	require.Len(t, release, 1)
	counted := <-release
	require.GreaterOrEqual(t, counted, onNotice, "every input left to the Relay is counted by the release")
	all, err := st.ListInputsBySession(ctx, id)
	require.NoError(t, err)
	require.Len(t, all, callers)
}

// TestAGuardedInputIsAcceptedOnlyWhereTheGuardAdmits: the guard's every condition
// refuses in the statement itself, writing nothing and taking no seq; a repeated
// client_message_id the guard admits gets its first input.
func TestAGuardedInputIsAcceptedOnlyWhereTheGuardAdmits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	other, err := st.CreateUser(ctx, store.NewUser{Email: uniq("other") + "@example.com"})
	require.NoError(t, err)
	owner := store.InputGuard{OwnerID: f.user.ID, MaxHeld: 2}
	accept := func(guard store.InputGuard, cmid *string) (store.Accepted, bool) {
		t.Helper()
		a, admitted, err := st.AcceptGuardedInput(ctx, store.NewInput{SessionID: f.session.ID, ClientMessageID: cmid, Content: "hi"}, guard)
		require.NoError(t, err)
		return a, admitted
	}
	first, admitted := accept(owner, ptr("m1"))
	require.True(t, admitted)
	require.Equal(t, int64(1), first.Input.Seq)
	_, admitted = accept(store.InputGuard{OwnerID: other.ID}, nil)
	require.False(t, admitted, "another user's Session")
	_, _, err = st.AcceptGuardedInput(ctx, store.NewInput{SessionID: uuid.NewString(), Content: "hi"}, owner)
	require.NoError(t, err, "no such Session is a refusal, not an error")

	second, admitted := accept(owner, nil)
	require.True(t, admitted)
	_, admitted = accept(owner, nil)
	require.False(t, admitted, "the Session holds its cap")
	_, admitted = accept(owner, ptr("m1"))
	require.False(t, admitted, "a repeat is refused at the cap as any input is")
	again, admitted := accept(store.InputGuard{OwnerID: f.user.ID}, ptr("m1"))
	require.True(t, admitted, "no cap")
	require.True(t, again.Duplicate, "a repeat the guard admits gets its first input")
	require.Equal(t, first.Input.ID, again.Input.ID)
	_, admitted = accept(store.InputGuard{OwnerID: f.user.ID}, nil)
	require.True(t, admitted, "no cap")

	_, err = st.SetSessionLifecycle(ctx, f.session.ID, store.LifecycleTerminated)
	require.NoError(t, err)
	_, admitted = accept(store.InputGuard{OwnerID: f.user.ID}, nil)
	require.False(t, admitted, "a terminated Session")
	_, err = st.SetSessionLifecycle(ctx, f.session.ID, store.LifecycleActive)
	require.NoError(t, err)
	_, err = st.DeleteSession(ctx, f.session.ID)
	require.NoError(t, err)
	_, admitted = accept(store.InputGuard{OwnerID: f.user.ID}, nil)
	require.False(t, admitted, "a deleted Session")

	inputs, err := st.ListInputsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, inputs, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{inputs[0].Seq, inputs[1].Seq, inputs[2].Seq}, "refusals took no seq")
	require.Equal(t, second.Input.ID, inputs[1].ID)
}
