package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

func TestFollowOutputReadsBacklogThenLiveParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	appName := uniq("follow")
	l, err := pubsub.Start(ctx, f.dsn, testutil.Logger(t), pubsub.Options{ApplicationName: appName})
	require.NoError(t, err)
	defer l.Close()
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)
	appendN := func(texts ...string) {
		t.Helper()
		parts := make([]store.NewPart, len(texts))
		for i, s := range texts {
			parts[i] = textPart("r1", s)
		}
		_, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Parts: parts})
		require.NoError(t, err)
	}
	appendN("a", "b", "c")

	fol, err := st.FollowOutput(ctx, l, f.session.ID, 1)
	require.NoError(t, err)
	defer fol.Close()
	for _, want := range []int64{2, 3} {
		p, err := fol.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, p.Seq)
	}

	// Next waits for a commit, and the commit's notification wakes it.
	type result struct {
		p   store.OutputPart
		err error
	}
	next := make(chan result, 1)
	go func() {
		p, err := fol.Next(ctx)
		next <- result{p, err}
	}()
	appendN("d", "e")
	r := <-next
	require.NoError(t, r.err)
	require.Equal(t, int64(4), r.p.Seq)
	p, err := fol.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), p.Seq)
	require.Equal(t, int64(5), fol.Seq())

	// A dropped listener ends the follow, so the stream closes and the client resumes.
	go func() {
		p, err := fol.Next(ctx)
		next <- result{p, err}
	}()
	killListener(t, f, appName)
	r = <-next
	require.ErrorIs(t, r.err, store.ErrListenerDropped)
}

// killListener terminates the listener's backend, as a failover would.
func killListener(t *testing.T, f *fixture, appName string) {
	t.Helper()
	require.NoError(t, store.ExecForTest(f.ctx, f.st, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?", appName))
}
