package store_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestCreateSessionIdempotentUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	key := uniq("key")

	const callers = 50
	var wg sync.WaitGroup
	ids := make(chan string, callers)
	created := make(chan bool, callers)
	for range callers {
		wg.Go(func() {
			s, isNew, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID, IdempotencyKey: key})
			if !assertNoError(t, err) {
				return
			}
			ids <- s.ID
			created <- isNew
		})
	}
	wg.Wait()
	close(ids)
	close(created)
	require.Len(t, ids, callers)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		}
		require.Equal(t, first, id, "one key, one Session")
	}
	newCount := 0
	for isNew := range created {
		if isNew {
			newCount++
		}
	}
	require.Equal(t, 1, newCount)

	s, err := st.GetSessionByID(ctx, first)
	require.NoError(t, err)
	require.Equal(t, store.LifecycleCreating, s.Lifecycle)
	require.Equal(t, "default", *s.PermissionMode, "the Agent's default mode")
	require.Equal(t, int64(0), s.OutputSeq)
	require.False(t, s.LastActivityAt.IsZero())

	// Another key, another user or no key gives another Session.
	other, isNew, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID, IdempotencyKey: uniq("key")})
	require.NoError(t, err)
	require.True(t, isNew)
	require.NotEqual(t, first, other.ID)
	u2, err := st.CreateUser(ctx, store.NewUser{Email: uniq("u2") + "@example.com"})
	require.NoError(t, err)
	theirs, isNew, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: u2.ID, AgentID: f.agent.ID, IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, isNew)
	require.NotEqual(t, first, theirs.ID)

	_, _, err = st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: "00000000-0000-0000-0000-000000000000"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// assertNoError reports err from a goroutine, where require must not be used.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// Many Sessions created at once by one user, each with its own key, under the cap on
// live boxes: every creation succeeds (the key's foreign key share-locks the user row
// the cap's check locks; a stronger lock there made two creations deadlock).
func TestCreateSessionsConcurrentlyUnderLiveBoxCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const callers = 30
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, isNew, err := f.st.CreateSessionIdempotent(f.ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID,
				IdempotencyKey: uniq("key"), MaxLiveBoxes: 1000})
			if assertNoError(t, err) {
				assert.True(t, isNew, "caller %d", i)
			}
		})
	}
	wg.Wait()
}
