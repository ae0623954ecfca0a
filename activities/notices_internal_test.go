package activities

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// TestATakeOfNoticesSaysWhenSomeWereDiscarded: with the worker's queue of one
// notice, a burst of three leaves one queued and two discarded (Dropped signalled
// too); whichever of the two the wait wakes on, the take reports the loss beside the
// notice it took. A lone notice is no loss, and a loss with nothing queued is one.
func TestATakeOfNoticesSaysWhenSomeWereDiscarded(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	_, dsn := testutil.NewDB(t)
	listener, err := pubsub.Start(ctx, dsn, zaptest.NewLogger(t), pubsub.Options{Buffer: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close() })
	inputs, err := listener.Subscribe(ctx, pubsub.SessionInputsChannel(uuid.NewString()))
	require.NoError(t, err)
	defer inputs.Close()
	// The listener hands notifications out in the order PostgreSQL sends them, so
	// once a marker on another channel arrived, every notice sent before it was
	// queued or discarded.
	marker, err := listener.Subscribe(ctx, pubsub.SessionInputsChannel(uuid.NewString()))
	require.NoError(t, err)
	defer marker.Close()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	notify := func(sub *pubsub.Subscription, payload string) {
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", sub.Channel(), payload)
		require.NoError(t, err)
	}
	send := func(payloads ...string) {
		for _, p := range payloads {
			notify(inputs, p)
		}
		notify(marker, "marker")
		select {
		case <-marker.C():
		case <-ctx.Done():
			t.Fatal("the marker never came")
		}
	}
	take := func() ([]string, bool) {
		notices, lost, open := nextNotices(ctx, inputs)
		require.True(t, open)
		var payloads []string
		for _, n := range notices {
			payloads = append(payloads, n.Payload)
		}
		return payloads, lost
	}

	// The wait picks at random between a queued notice and a loss signalled beside
	// it: every round must report the loss.
	for range 20 {
		send("1", "2", "3")
		payloads, lost := take()
		require.Equal(t, []string{"1"}, payloads)
		require.True(t, lost, "two notices were discarded")
	}
	send("4")
	payloads, lost := take()
	require.Equal(t, []string{"4"}, payloads)
	require.False(t, lost)

	send("5", "6")
	payloads, lost = take()
	require.Equal(t, []string{"5"}, payloads)
	require.True(t, lost)
}

// TestALossHandsOverEveryHeldInputWithTheNoticesTaken: notices taken with a loss
// are handed over with a read of the held inputs, which covers the input whose
// notice was discarded, though the notices taken follow on from the last input.
func TestALossHandsOverEveryHeldInputWithTheNoticesTaken(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	f := newHandOverFixture(ctx, t)
	st, a, client, l := f.st, f.a, f.client, f.l
	r := &relayRun{a: a, l: l, lease: 1, log: zaptest.NewLogger(t)}
	notice := func(content string) pubsub.Notification {
		n := f.accept(ctx, t, content)
		return pubsub.Notification{Channel: pubsub.SessionInputsChannel(f.sess.ID), Payload: fmt.Sprintf("%d %s %s", n.Seq, n.ID, content)}
	}

	require.True(t, r.handOverNotices(ctx, []pubsub.Notification{notice("one")}, true), "a loss before the first notice")
	require.Equal(t, []string{"one"}, client.submitted())
	two := notice("two")
	notice("three") // its notice was discarded
	require.True(t, r.handOverNotices(ctx, []pubsub.Notification{two}, true))
	require.Equal(t, []string{"one", "two", "three"}, client.submitted())
	require.True(t, r.handOverNotices(ctx, []pubsub.Notification{notice("four")}, false))
	require.Equal(t, []string{"one", "two", "three", "four"}, client.submitted())
	require.NoError(t, a.awaitDeliveryWriter(ctx, l))
	held, err := st.ListHeldInputsBySession(ctx, f.sess.ID)
	require.NoError(t, err)
	for _, in := range held {
		require.Equal(t, store.InputDelivered, in.State, in.Content)
	}
}
