package pubsub_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store/pubsub"
)

func TestMain(m *testing.M) { testutil.MainNoLeaks(m) }

func uniq(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// env is a fresh database, a Listener on it and a plain connection to send NOTIFYs.
type env struct {
	ctx     context.Context
	l       *pubsub.Listener
	sender  *pgx.Conn
	appName string
	dsn     string
}

func newEnv(t *testing.T, opts pubsub.Options) *env {
	t.Helper()
	_, dsn := testutil.NewDB(t)
	ctx := testutil.Context(t)
	if opts.ApplicationName == "" {
		opts.ApplicationName = uniq("listener")
	}
	l, err := pubsub.Start(ctx, dsn, testutil.Logger(t), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	sender, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sender.Close(context.Background()) })
	return &env{ctx: ctx, l: l, sender: sender, appName: opts.ApplicationName, dsn: dsn}
}

func (e *env) notify(t *testing.T, channel, payload string) {
	t.Helper()
	_, err := e.sender.Exec(e.ctx, "SELECT pg_notify($1, $2)", channel, payload)
	require.NoError(t, err)
}

func receive(t *testing.T, ctx context.Context, sub *pubsub.Subscription) pubsub.Notification {
	t.Helper()
	select {
	case n, ok := <-sub.C():
		require.True(t, ok, "subscription closed")
		return n
	case <-ctx.Done():
		t.Fatalf("no notification on %s: %v", sub.Channel(), ctx.Err())
		return pubsub.Notification{}
	}
}

func waitDropped(t *testing.T, ctx context.Context, sub *pubsub.Subscription) {
	t.Helper()
	select {
	case <-sub.Dropped():
	case <-ctx.Done():
		t.Fatalf("no dropped signal on %s: %v", sub.Channel(), ctx.Err())
	}
}

func TestSubscribeReceivesOnlyItsChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{})
	chA := pubsub.SessionOutputChannel("00000000-0000-0000-0000-00000000000a")
	chB := pubsub.SessionOutputChannel("00000000-0000-0000-0000-00000000000b")

	a1, err := e.l.Subscribe(e.ctx, chA)
	require.NoError(t, err)
	a2, err := e.l.Subscribe(e.ctx, chA)
	require.NoError(t, err)
	b, err := e.l.Subscribe(e.ctx, chB)
	require.NoError(t, err)

	// Subscribe returned, so the LISTEN is active: a NOTIFY sent now is not missed.
	e.notify(t, chB, "7")
	e.notify(t, chA, "42")
	gotA1, gotA2 := receive(t, e.ctx, a1), receive(t, e.ctx, a2)
	require.Equal(t, [2]string{chA, "42"}, [2]string{gotA1.Channel, gotA1.Payload}, "A's subscriber sees A's first, not B's")
	require.Equal(t, [2]string{chA, "42"}, [2]string{gotA2.Channel, gotA2.Payload})
	gotB := receive(t, e.ctx, b)
	require.Equal(t, [2]string{chB, "7"}, [2]string{gotB.Channel, gotB.Payload})
	// Both of A's subscribers read a payload as an output notice from one parse.
	e.notify(t, chA, `43 [{"type": "x"}]`)
	n1, err := receive(t, e.ctx, a1).OutputNotice()
	require.NoError(t, err)
	n2, err := receive(t, e.ctx, a2).OutputNotice()
	require.NoError(t, err)
	require.Equal(t, int64(43), n1.Seq)
	require.Len(t, n1.Frames, 1)
	require.Same(t, &n1.Frames[0][0], &n2.Frames[0][0], "the frames of one parse")
	// and share what they derive from it: the first derives, the other reuses it.
	derivations := 0
	derive := func(n pubsub.OutputNotice) any {
		derivations++
		return n.FirstSeq()
	}
	require.Equal(t, int64(43), n1.Derived(derive))
	require.Equal(t, int64(43), n2.Derived(derive))
	require.Equal(t, 1, derivations, "one derivation for the notification's subscribers")
	notice, err := pubsub.ParseOutputNotice("42")
	require.NoError(t, err)
	require.Equal(t, pubsub.OutputNotice{Seq: 42}, notice)
	notice.Derived(derive)
	notice.Derived(derive)
	require.Equal(t, 3, derivations, "a notice parsed on its own derives at each call")
	notice, err = pubsub.ParseOutputNotice(`42 [{"type": "text-delta"}, {"type": "finish"}]`)
	require.NoError(t, err)
	require.Equal(t, int64(41), notice.FirstSeq(), "the frames are the parts up to the seq")
	require.Len(t, notice.Frames, 2)
	require.JSONEq(t, `{"type":"finish"}`, string(notice.Frames[1]))
	for _, bad := range []string{"", "x", "42 [", "42 {}"} {
		_, err := pubsub.ParseOutputNotice(bad)
		require.Error(t, err, "payload %q", bad)
	}

	// Closing one subscriber leaves the other listening.
	a1.Close()
	_, open := <-a1.C()
	require.False(t, open)
	e.notify(t, chA, "43")
	require.Equal(t, "43", receive(t, e.ctx, a2).Payload)

	_, err = e.l.Subscribe(e.ctx, "")
	require.Error(t, err)
	_, err = e.l.Subscribe(e.ctx, string(make([]byte, 64)))
	require.Error(t, err)
}

// TestParseInputNoticeKeepsTheContentAsItIs: the content is everything after the id,
// its own spaces and newlines included, and a notice without it says so.
func TestParseInputNoticeKeepsTheContentAsItIs(t *testing.T) {
	t.Parallel()
	notice, err := pubsub.ParseInputNotice("7 4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e  two spaces, \n a line\n")
	require.NoError(t, err)
	require.Equal(t, pubsub.InputNotice{Seq: 7, ID: "4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e", Content: " two spaces, \n a line\n", Carried: true}, notice)
	notice, err = pubsub.ParseInputNotice("8 4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e ")
	require.NoError(t, err)
	require.True(t, notice.Carried, "an empty content is carried too")
	notice, err = pubsub.ParseInputNotice("9 4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e")
	require.NoError(t, err)
	require.Equal(t, pubsub.InputNotice{Seq: 9, ID: "4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e"}, notice, "content too big for a notification")
	for _, bad := range []string{"", "4b1c0f3e-6a0e-4d49-9d7c-5f3a2b1c0d9e", "x y", "0 id", "-1 id", "7", "7 "} {
		_, err := pubsub.ParseInputNotice(bad)
		require.Error(t, err, "payload %q", bad)
	}
}

func TestDroppedConnectionIsReportedAndRecovered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{MaxBackoff: 100 * time.Millisecond})
	ch := pubsub.SessionOutputChannel("00000000-0000-0000-0000-0000000000dd")
	sub, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	e.notify(t, ch, "1")
	require.Equal(t, "1", receive(t, e.ctx, sub).Payload)

	// Kill the listener's backend, as a failover or an idle-killer would, and keep it
	// from reconnecting until the drop was taken: the signal of listening again is
	// then one of its own, not merged into the drop's.
	cfg, err := pgx.ParseConfig(e.dsn)
	require.NoError(t, err)
	database := cfg.Database
	cfg.Database = "postgres" // a database's connections are switched off from another
	admin, err := pgx.ConnectConfig(e.ctx, cfg)
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(e.ctx))
	allowConnections := func(allow bool) {
		_, err := admin.Exec(e.ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", pgx.Identifier{database}.Sanitize(), allow))
		require.NoError(t, err)
	}
	allowConnections(false)
	var terminated int
	err = e.sender.QueryRow(e.ctx, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t", e.appName).Scan(&terminated)
	require.NoError(t, err)
	require.Equal(t, 1, terminated)

	waitDropped(t, e.ctx, sub)
	allowConnections(true)

	// A new subscription is ready only on a live connection whose LISTEN set includes
	// every channel, so once it returns the old subscription hears again.
	probe, err := e.l.Subscribe(e.ctx, uniq("probe"))
	require.NoError(t, err)
	defer probe.Close()
	select {
	case <-sub.Dropped():
		// Listening again is signalled too, so a follower re-reads after the gap.
	default:
		t.Fatal("no dropped signal pending after the listener resumed")
	}
	e.notify(t, ch, "2")
	require.Equal(t, "2", receive(t, e.ctx, sub).Payload)
}

func TestSlowSubscriberNeverBlocksOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{Buffer: 1})
	ch := uniq("slow")
	sub, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	other, err := e.l.Subscribe(e.ctx, uniq("other"))
	require.NoError(t, err)

	// Two notifications in one transaction arrive together; the second does not fit in
	// the slow subscriber's queue: it is discarded and the subscriber told to re-read.
	_, err = e.sender.Exec(e.ctx, "SELECT pg_notify($1, '1'), pg_notify($1, '2')", ch)
	require.NoError(t, err)
	// The loop handles notifications in order, so once "x" arrives both were handled.
	e.notify(t, other.Channel(), "x")
	require.Equal(t, "x", receive(t, e.ctx, other).Payload)

	require.Equal(t, "1", receive(t, e.ctx, sub).Payload)
	require.Empty(t, sub.C())
	select {
	case <-sub.Dropped():
	default:
		t.Fatal("a discarded notification has the subscriber re-read: its queued ones are older")
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{})
	sub, err := e.l.Subscribe(e.ctx, uniq("c"))
	require.NoError(t, err)
	require.NoError(t, e.l.Close())
	_, open := <-sub.C()
	require.False(t, open)
	_, err = e.l.Subscribe(e.ctx, uniq("c"))
	require.ErrorIs(t, err, pubsub.ErrClosed)
	require.NoError(t, e.l.Close(), "closing twice is harmless")
}

func TestFrequentHealthChecksKeepTheConnectionUsable(t *testing.T) {
	t.Parallel()
	// Health checks interrupt the wait every millisecond and ping; notifications
	// arriving around them must still be delivered, in order.
	e := newEnv(t, pubsub.Options{HealthInterval: time.Millisecond})
	ch := uniq("health")
	sub, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	for i := range 20 {
		e.notify(t, ch, strconv.Itoa(i))
		require.Equal(t, strconv.Itoa(i), receive(t, e.ctx, sub).Payload)
	}
}

// TestALeftChannelLingersThenIsUnlistened: a channel stays listened to for Linger
// after its last subscriber left, so the next one is ready without a LISTEN and
// hears what is sent; past Linger it is unlistened, and a later subscriber listens
// to it again.
func TestALeftChannelLingersThenIsUnlistened(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{Linger: 3 * time.Second})
	ch := pubsub.SessionOutputChannel("00000000-0000-0000-0000-00000000000c")

	first, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	first.Close()
	require.Contains(t, e.l.Listening(), ch, "the channel lingers after its last subscriber left")
	again, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	e.notify(t, ch, "1")
	require.Equal(t, "1", receive(t, e.ctx, again).Payload)

	again.Close()
	require.Eventually(t, func() bool { return !slices.Contains(e.l.Listening(), ch) }, 30*time.Second, 20*time.Millisecond,
		"unlistened once it lingered")
	later, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	require.Contains(t, e.l.Listening(), ch)
	e.notify(t, ch, "2")
	require.Equal(t, "2", receive(t, e.ctx, later).Payload)
	later.Close()
}

// TestAnAbandonedChannelIsUnlistenedAtOnce: a subscription abandoned (taken before
// its subscriber was known to be allowed it) leaves no channel lingering, unless
// another subscriber still needs it.
func TestAnAbandonedChannelIsUnlistenedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pubsub.Options{Linger: time.Hour})
	ch := pubsub.SessionOutputChannel("00000000-0000-0000-0000-00000000000d")

	kept, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	refused, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	refused.Abandon()
	require.Contains(t, e.l.Listening(), ch, "another subscriber still needs it")
	e.notify(t, ch, "1")
	require.Equal(t, "1", receive(t, e.ctx, kept).Payload)
	kept.Close()
	require.Contains(t, e.l.Listening(), ch, "a closed one lingers")
	refusedAgain, err := e.l.Subscribe(e.ctx, ch)
	require.NoError(t, err)
	refusedAgain.Abandon()
	require.Contains(t, e.l.Listening(), ch, "abandoning a lingering channel lets it linger on")

	other := pubsub.SessionOutputChannel("00000000-0000-0000-0000-00000000000e")

	alone, err := e.l.Subscribe(e.ctx, other)
	require.NoError(t, err)
	alone.Abandon()
	require.Eventually(t, func() bool { return !slices.Contains(e.l.Listening(), other) }, 30*time.Second, 10*time.Millisecond,
		"unlistened at once, although the linger is an hour")
	require.Contains(t, e.l.Listening(), ch)
}
