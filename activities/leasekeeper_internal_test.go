package activities

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// TestLeaseKeeperRenewsTheLeasesItHolds: the worker's keeper extends every held lease
// whose Relay went round lately, leaves a stuck Relay's lease to run out, tells a
// Relay whose lease was taken, and stops once it holds none.
func TestLeaseKeeperRenewsTheLeasesItHolds(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	st, _ := testutil.NewDB(t)
	newSession := scriptedSessions(ctx, t, st)
	acquire := func() store.ReaderLease {
		l, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: newSession().ID, Holder: "worker-a", TTL: time.Minute})
		require.NoError(t, err)
		return l
	}
	expiry := func(l store.ReaderLease) time.Time {
		now, err := st.GetReaderLeaseBySession(ctx, l.SessionID)
		require.NoError(t, err)
		return now.ExpiresAt
	}
	ref := func(l store.ReaderLease) store.LeaseRef {
		return store.LeaseRef{SessionID: l.SessionID, Generation: l.Generation}
	}

	k := newLeaseKeeper(st, Settings{HeartbeatEvery: 20 * time.Millisecond, LeaseTTL: time.Minute}, zaptest.NewLogger(t))
	var going, stuck atomic.Int64
	going.Store(math.MaxInt64) // a loop that always went round just now
	kept, stale, taken := acquire(), acquire(), acquire()
	keptLost, releaseKept := k.hold(ref(kept), &going)
	staleLost, releaseStale := k.hold(ref(stale), &stuck)
	takenLost, releaseTaken := k.hold(ref(taken), &going)

	_, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: taken.SessionID, Holder: "worker-b", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	select {
	case err := <-takenLost:
		require.True(t, errors.Is(err, store.ErrLeaseLost), "%v", err)
	case <-ctx.Done():
		t.Fatal("the Relay whose lease was taken was not told")
	}
	require.Eventually(t, func() bool { return expiry(kept).After(kept.ExpiresAt) }, 10*time.Second, 10*time.Millisecond,
		"a held lease is extended")
	require.True(t, expiry(stale).Equal(stale.ExpiresAt), "a stuck Relay's lease is left to run out")
	require.Empty(t, keptLost)
	require.Empty(t, staleLost)

	releaseKept()
	releaseStale()
	releaseTaken()
	k.mu.Lock()
	require.Nil(t, k.stop, "the keeper stops when it holds no lease")
	k.mu.Unlock()
	renewedLast := expiry(kept)
	again, releaseAgain := k.hold(ref(kept), &going)
	defer releaseAgain()
	require.Eventually(t, func() bool { return expiry(kept).After(renewedLast) }, 10*time.Second, 10*time.Millisecond,
		"a lease held again starts the keeper again")
	require.Empty(t, again)
}
