package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// committedRecorder is a runtime connection that takes what the Relay committed and
// keeps no native log; other methods are not called by a Relay's batch.
type committedRecorder struct {
	engines.RuntimeClient
	through []engines.RuntimeCursor
}

// EngineSessionKey is empty: the program declares no native log to mirror.
func (c *committedRecorder) EngineSessionKey() string { return "" }

func (c *committedRecorder) Committed(_ context.Context, cur engines.RuntimeCursor) error {
	c.through = append(c.through, cur)
	return nil
}

// TestTheEventsReadWhileTheLogIsReadJoinTheAdmission: a batch that admits an input
// takes the events queued behind it into its own transaction (a reply's first parts
// commit with the admission), up to the next input's admission, which waits for its
// own read of the session log.
func TestTheEventsReadWhileTheLogIsReadJoinTheAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHandOverFixture(ctx, t)
	client := &committedRecorder{}
	f.l.client = client
	first, second := f.accept(ctx, t, "one"), f.accept(ctx, t, "two")
	lease, err := f.st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.sess.ID, Holder: "test", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	r := &relayRun{a: f.a, l: f.l, lease: lease.Generation, log: zaptest.NewLogger(t)}

	at := func(n int) engines.RuntimeCursor {
		return engines.RuntimeCursor{Generation: "g1", Position: json.RawMessage(fmt.Sprint(n))}
	}
	delta := func(n int, text string) eventOrErr {
		frame := engines.MustFrame(engines.TextDeltaChunk{ID: "t1", Delta: text})
		return eventOrErr{ev: engines.ResponseOutput{Cursor: at(n), ResponseID: "resp-1", Frame: frame}, read: time.Now()}
	}
	queue := newEventQueue(64)
	for _, it := range []eventOrErr{
		{ev: engines.ResponseStarted{Cursor: at(2), ResponseID: "resp-1", Origin: engines.OriginInput, InputIDs: []string{first.ID}}, read: time.Now()},
		delta(3, "a"), delta(4, "b"),
		{ev: engines.InputAdmitted{Cursor: at(5), InputID: second.ID}, read: time.Now()},
		delta(6, "c"),
	} {
		require.True(t, queue.push(ctx, it))
	}

	admission := []eventOrErr{{ev: engines.InputAdmitted{Cursor: at(1), InputID: first.ID}, read: time.Now()}}
	cursor, err := r.record(ctx, queue, admission, nil)
	require.NoError(t, err)
	require.Equal(t, at(4), *cursor, "the batch ends before the next admission")
	require.Equal(t, []engines.RuntimeCursor{at(4)}, client.through)
	left, _ := queue.take()
	require.Len(t, left, 2, "the next admission and what follows it stay queued")
	require.IsType(t, engines.InputAdmitted{}, left[0].ev)

	conn, err := pgx.Connect(ctx, f.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var admittedIn string
	require.NoError(t, conn.QueryRow(ctx, `SELECT xmin::text FROM inputs WHERE id = $1 AND admitted_at IS NOT NULL`, first.ID).Scan(&admittedIn))
	var partsIn []string
	rows, err := conn.Query(ctx, `SELECT DISTINCT xmin::text FROM output_parts WHERE session_id = $1`, f.sess.ID)
	require.NoError(t, err)
	partsIn, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{admittedIn}, partsIn, "the reply's first parts committed with the admission")
	var secondAdmitted bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT admitted_at IS NOT NULL FROM inputs WHERE id = $1`, second.ID).Scan(&secondAdmitted))
	require.False(t, secondAdmitted)
}
