package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestListSessionsWithUnclaimedInputs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	newSession := func() string {
		sess, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
		require.NoError(t, err)
		return sess.ID
	}
	send := func(sessionID string) store.Input {
		in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: sessionID, Content: "hello"})
		require.NoError(t, err)
		return in
	}

	// waiting holds two pending inputs; the sweep names the first.
	waiting := f.session.ID
	first := send(waiting)
	send(waiting)
	// picked holds only an input a runtime received.
	picked := newSession()
	delivered := send(picked)
	moved, err := st.MarkInputDelivered(ctx, picked, delivered.ID)
	require.NoError(t, err)
	require.True(t, moved)
	// later holds a pending input accepted after the others.
	later := newSession()
	laterInput := send(later)
	// Archived, deleted and terminated Sessions are not signalled.
	archived, deleted, terminated := newSession(), newSession(), newSession()
	for _, id := range []string{archived, deleted, terminated} {
		send(id)
	}
	_, err = st.ArchiveSession(ctx, archived)
	require.NoError(t, err)
	_, err = st.DeleteSession(ctx, deleted)
	require.NoError(t, err)
	_, err = st.SetSessionLifecycle(ctx, terminated, store.LifecycleTerminated)
	require.NoError(t, err)

	cutoff := time.Now().Add(time.Minute)
	got, err := st.ListSessionsWithUnclaimedInputs(ctx, cutoff, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, waiting, got[0].SessionID)
	require.Equal(t, first.ID, got[0].OldestInputID)
	require.Equal(t, 2, got[0].Pending)
	require.WithinDuration(t, first.AcceptedAt, got[0].OldestAcceptedAt, time.Millisecond)
	require.Equal(t, later, got[1].SessionID)
	require.Equal(t, laterInput.ID, got[1].OldestInputID)

	limited, err := st.ListSessionsWithUnclaimedInputs(ctx, cutoff, 1)
	require.NoError(t, err)
	require.Len(t, limited, 1, "the sweep is bounded")
	require.Equal(t, waiting, limited[0].SessionID, "oldest first")

	// Inputs still inside the grace period are left to their own signal.
	early, err := st.ListSessionsWithUnclaimedInputs(ctx, first.AcceptedAt, 10)
	require.NoError(t, err)
	require.Empty(t, early)

	// Once admitted, nothing is left to signal.
	_, err = st.MarkInputsAdmitted(ctx, later, []string{laterInput.ID})
	require.NoError(t, err)
	got, err = st.ListSessionsWithUnclaimedInputs(ctx, cutoff, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, waiting, got[0].SessionID)
}
