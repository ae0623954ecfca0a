package activities

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// submitRecorder is a runtime connection that records what it was handed and reports
// itself idle with nothing queued (a runtime that lost what it had received). Other
// methods are not called by a hand-over.
type submitRecorder struct {
	engines.RuntimeClient
	mu     sync.Mutex
	inputs []engines.RuntimeInput
}

func (c *submitRecorder) Submit(_ context.Context, in engines.RuntimeInput) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inputs = append(c.inputs, in)
	return nil
}

func (c *submitRecorder) State(context.Context) (engines.RuntimeState, error) {
	return engines.RuntimeState{Status: engines.StatusIdle}, nil
}

// submitted is the text of every input handed over so far, in order.
func (c *submitRecorder) submitted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, in := range c.inputs {
		out = append(out, in.Content[0].Text)
	}
	return out
}

// handOverFixture is a new Session of the scripted program in a test database and a
// live runtime of it whose connection records what it is handed (generation 1).
type handOverFixture struct {
	st      *store.Store
	dsn     string
	sess    store.Session
	metrics *telemetry.Metrics
	a       *Activities
	client  *submitRecorder
	l       *liveRuntime
}

func newHandOverFixture(ctx context.Context, t testing.TB) *handOverFixture {
	t.Helper()
	f := &handOverFixture{metrics: telemetry.NewMetrics(nil), client: &submitRecorder{}}
	f.st, f.dsn = testutil.NewDB(t)
	f.sess = scriptedSessions(ctx, t, f.st)()
	f.a = &Activities{deps: Deps{Store: f.st}, metrics: f.metrics, log: zaptest.NewLogger(t)}
	f.l = &liveRuntime{sessionID: f.sess.ID, generation: 1, client: f.client}
	return f
}

// accept accepts an input and returns its notice as the insert announced it.
func (f *handOverFixture) accept(ctx context.Context, t testing.TB, content string) pubsub.InputNotice {
	t.Helper()
	in, _, err := f.st.InsertInput(ctx, store.NewInput{SessionID: f.sess.ID, Content: content})
	require.NoError(t, err)
	n := pubsub.InputNotice{Seq: in.Seq, ID: in.ID}
	if len(content) <= pubsub.MaxNoticeContent {
		n.Content, n.Carried = content, true
	}
	return n
}

// TestANoticedInputIsHandedOverOnlyRightAfterTheLastOne: an input notice is handed
// over as it is when its seq follows the last input handed over and it carries the
// content; a gap, content left out, or inputs a reconciliation took back leave it to
// a read of the held inputs, which hands everything over in accepted order; a notice
// of an input already handed over hands nothing again.
func TestANoticedInputIsHandedOverOnlyRightAfterTheLastOne(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	f := newHandOverFixture(ctx, t)
	st, a, client, l := f.st, f.a, f.client, f.l
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.sess.ID, Holder: "worker-a", TTL: time.Minute})
	require.NoError(t, err)
	handed := func(source string) int {
		return int(promtest.ToFloat64(f.metrics.InputsHandedOver.WithLabelValues(source)))
	}
	accept := func(content string) pubsub.InputNotice { return f.accept(ctx, t, content) }
	noticed := func(n pubsub.InputNotice) bool {
		ok, err := a.handOverNoticed(ctx, l, n)
		require.NoError(t, err)
		return ok
	}
	deliver := func(committedThrough int64) {
		_, err := a.deliverHeld(ctx, l, committedThrough)
		require.NoError(t, err)
	}

	accept("one")
	accept("two")
	deliver(0)
	three := accept("three")
	require.True(t, noticed(three))
	require.Equal(t, []string{"one", "two", "three"}, client.submitted())
	require.Equal(t, 1, handed(handedFromNotice))
	require.True(t, noticed(three), "a notice of an input handed over already")
	require.Len(t, client.submitted(), 3, "is not handed over again")
	require.NoError(t, a.awaitDeliveryWriter(ctx, l))
	stored, err := st.GetInputByID(ctx, three.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputDelivered, stored.State, "an input handed over from its notice is recorded delivered")

	// A gap: the notice of five came before four's.
	four, five := accept("four"), accept("five")
	require.False(t, noticed(five))
	deliver(five.Seq)
	require.True(t, noticed(four), "the read covered the inputs up to the notices'")
	require.Equal(t, []string{"one", "two", "three", "four", "five"}, client.submitted())

	// Content too big for its notification.
	big := accept(strings.Repeat("x", pubsub.MaxNoticeContent+1))
	require.False(t, big.Carried)
	require.False(t, noticed(big))
	deliver(big.Seq)
	six := accept("six")
	require.True(t, noticed(six))

	// The runtime lost what it had received: a reconciliation takes it all back, and
	// the next notice waits for a read that hands it over again first.
	r := &relayRun{a: a, l: l, lease: lease.Generation, log: zaptest.NewLogger(t)}
	_, err = r.reconcile(ctx, nil)
	require.NoError(t, err)
	before := len(client.submitted())
	seven := accept("seven")
	require.False(t, noticed(seven), "inputs were taken back")
	require.Len(t, client.submitted(), before, "nothing handed over ahead of them")
	deliver(seven.Seq)
	again := client.submitted()[before:]
	require.Len(t, again, 8)
	require.Equal(t, []string{"one", "two", "three", "four", "five"}, again[:5])
	require.Equal(t, []string{"six", "seven"}, again[6:])
	eight := accept("eight")
	require.True(t, noticed(eight), "handed over from its notice again")
	require.Equal(t, "eight", client.submitted()[len(client.submitted())-1])
	require.Equal(t, 3, handed(handedFromNotice), "three, six and eight")
	require.Equal(t, 13, handed(handedFromRead), "one and two, four and five, the big one, then all eight")
}

// TestAnInputIsHandedOverWhileTheRecordOfTheOneBeforeWaits: an input noticed right
// behind another reaches the runtime while the first one's delivery record waits on
// PostgreSQL (its row locked by another transaction); both are recorded delivered
// once the lock goes. A record that fails leaves its input pending, and the next
// notice waits for a read that hands it over again and records it.
func TestAnInputIsHandedOverWhileTheRecordOfTheOneBeforeWaits(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	f := newHandOverFixture(ctx, t)
	st, dsn, a, client, l := f.st, f.dsn, f.a, f.client, f.l
	accept := func(content string) pubsub.InputNotice { return f.accept(ctx, t, content) }
	state := func(n pubsub.InputNotice) string {
		in, err := st.GetInputByID(ctx, n.ID)
		require.NoError(t, err)
		return in.State
	}
	// lockRow holds the input's row in a transaction of its own until the returned
	// function rolls it back.
	lockRow := func(n pubsub.InputNotice) func() {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SELECT 1 FROM inputs WHERE id = $1 FOR UPDATE", n.ID)
		require.NoError(t, err)
		return func() { require.NoError(t, tx.Rollback(ctx)) }
	}

	accept("zero")
	_, err := a.deliverHeld(ctx, l, 0)
	require.NoError(t, err)

	one, two := accept("one"), accept("two")
	release := lockRow(one)
	for _, n := range []pubsub.InputNotice{one, two} {
		handed, err := a.handOverNoticed(ctx, l, n)
		require.NoError(t, err)
		require.True(t, handed)
	}
	require.Equal(t, []string{"zero", "one", "two"}, client.submitted(), "two went to the runtime behind one")
	require.Equal(t, store.InputPending, state(one), "while one's record waits")
	release()
	require.NoError(t, a.awaitDeliveryWriter(ctx, l))
	for _, n := range []pubsub.InputNotice{one, two} {
		in, err := st.GetInputByID(ctx, n.ID)
		require.NoError(t, err)
		require.Equal(t, store.InputDelivered, in.State)
		require.Equal(t, int64(1), *in.DeliveredRuntimeGeneration)
	}

	// The record fails (its statement cancelled while it waits): three stays
	// pending, and the next notice is left to a read that hands three over again.
	three := accept("three")
	release = lockRow(three)
	recordCtx, cancelRecord := context.WithCancel(ctx)
	handed, err := a.handOverNoticed(recordCtx, l, three)
	require.NoError(t, err)
	require.True(t, handed)
	cancelRecord()
	require.NoError(t, a.awaitDeliveryWriter(ctx, l))
	release()
	require.Equal(t, store.InputPending, state(three))
	four := accept("four")
	handed, err = a.handOverNoticed(ctx, l, four)
	require.NoError(t, err)
	require.False(t, handed, "three's record is missing")
	_, err = a.deliverHeld(ctx, l, four.Seq)
	require.NoError(t, err)
	require.Equal(t, []string{"zero", "one", "two", "three", "three", "four"}, client.submitted())
	require.Equal(t, store.InputDelivered, state(three))
	require.Equal(t, store.InputDelivered, state(four))
}
