package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

func textPart(resp, text string) store.NewPart {
	return store.NewPart{ResponseID: &resp, Frame: json.RawMessage(fmt.Sprintf(`{"type":"text-delta","id":"t1","delta":%q}`, text))}
}

func cursorAt(gen string, offset int) *store.CursorUpdate {
	return &store.CursorUpdate{Generation: gen, Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, offset))}
}

func TestReaderLeaseAcquisition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	a, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-a", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Generation)

	_, err = st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-b", TTL: time.Minute})
	require.ErrorIs(t, err, store.ErrLeaseHeld)

	again, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-a", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, int64(2), again.Generation, "re-acquiring fences the holder's older self")

	stolen, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-b", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	require.Equal(t, int64(3), stolen.Generation)
	require.Equal(t, "host-b", stolen.Holder)

	renewed, err := st.RenewReaderLeases(ctx, []store.LeaseRef{{SessionID: f.session.ID, Generation: again.Generation}}, time.Minute)
	require.NoError(t, err)
	require.Empty(t, renewed, "a superseded generation is not renewed")
	renewed, err = st.RenewReaderLeases(ctx, []store.LeaseRef{{SessionID: f.session.ID, Generation: stolen.Generation}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, renewed, 1)
	require.Equal(t, stolen.Generation, renewed[0].Generation)
	require.True(t, renewed[0].ExpiresAt.After(stolen.ExpiresAt))

	// An expired lease is free for anyone.
	renewed, err = st.RenewReaderLeases(ctx, []store.LeaseRef{{SessionID: f.session.ID, Generation: stolen.Generation}}, -time.Minute)
	require.NoError(t, err)
	require.Len(t, renewed, 1)
	c, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-c", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, int64(4), c.Generation)
}

// TestReaderLeasesRenewTogether renews many Sessions' leases in one statement: each
// one still held is extended, a superseded generation, a Session without a lease and
// an unknown Session are left out, and nothing else changes.
func TestReaderLeasesRenewTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	var held []store.ReaderLease
	for range 3 {
		sess, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
		require.NoError(t, err)
		l, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: sess.ID, Holder: "host-a", TTL: time.Minute})
		require.NoError(t, err)
		held = append(held, l)
	}
	stolen, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: held[1].SessionID, Holder: "host-b", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	unleased, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)

	refs := []store.LeaseRef{{SessionID: unleased.ID, Generation: 1}, {SessionID: "00000000-0000-4000-8000-000000000000", Generation: 1}}
	for _, l := range slices.Backward(held) {
		refs = append(refs, store.LeaseRef{SessionID: l.SessionID, Generation: l.Generation})
	}
	renewed, err := st.RenewReaderLeases(ctx, refs, time.Hour)
	require.NoError(t, err)
	got := map[string]store.ReaderLease{}
	for _, l := range renewed {
		got[l.SessionID] = l
	}
	require.Len(t, got, 2)
	for _, l := range []store.ReaderLease{held[0], held[2]} {
		require.Equal(t, l.Generation, got[l.SessionID].Generation)
		require.Equal(t, "host-a", got[l.SessionID].Holder)
		require.True(t, got[l.SessionID].ExpiresAt.After(l.ExpiresAt.Add(50*time.Minute)), "extended by the ttl")
	}
	thief, err := st.GetReaderLeaseBySession(ctx, stolen.SessionID)
	require.NoError(t, err)
	require.Equal(t, stolen.Generation, thief.Generation)
	require.True(t, thief.ExpiresAt.Equal(stolen.ExpiresAt), "the thief's lease is untouched")

	renewed, err = st.RenewReaderLeases(ctx, nil, time.Minute)
	require.NoError(t, err)
	require.Empty(t, renewed)
}

func TestZombieReaderWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	old, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "old", TTL: time.Minute})
	require.NoError(t, err)
	res, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: old.Generation,
		Parts: []store.NewPart{textPart("r1", "a"), textPart("r1", "b")}, Cursor: cursorAt("g1", 2)})
	require.NoError(t, err)
	require.Equal(t, store.AppendResult{FirstSeq: 1, LastSeq: 2, Parts: 2}, res)

	// A new reader takes over; the old one, still running, tries to write.
	_, err = st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "new", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	_, err = st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: old.Generation,
		Parts: []store.NewPart{textPart("r1", "zombie")}, Cursor: cursorAt("g1", 99)})
	require.ErrorIs(t, err, store.ErrLeaseLost)

	parts, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, parts, 2, "the zombie's part was not written")
	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.OutputSeq, "output_seq unchanged")
	cur, err := st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":2}`, string(cur.Position), "the zombie's cursor was not written")

	// No lease at all is refused too.
	f2 := newFixture(t)
	_, err = f2.st.AppendParts(f2.ctx, store.AppendRequest{SessionID: f2.session.ID, LeaseGeneration: 1, Parts: []store.NewPart{textPart("r", "x")}})
	require.ErrorIs(t, err, store.ErrLeaseLost)
}

func TestOutputSeqHasNoGapsUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)

	const writers, batches = 10, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				n := 1 + (w+b)%3
				parts := make([]store.NewPart, n)
				for i := range parts {
					parts[i] = textPart("r1", fmt.Sprintf("w%d-b%d-%d", w, b, i))
				}
				res, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Parts: parts})
				if assertNoError(t, err) && res.LastSeq-res.FirstSeq+1 != int64(n) {
					t.Errorf("batch of %d got seqs %d..%d", n, res.FirstSeq, res.LastSeq)
				}
			}
		})
	}
	wg.Wait()
	parts, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 10000)
	require.NoError(t, err)
	for i, p := range parts {
		require.Equal(t, int64(i+1), p.Seq, "seq without gaps")
	}
	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(len(parts)), s.OutputSeq)
	require.NotNil(t, s.LastOutputAt)

	after, err := st.ListOutputPartsAfter(ctx, f.session.ID, 5, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{6, 7, 8}, []int64{after[0].Seq, after[1].Seq, after[2].Seq})
}

// An input's receipt does not wait for a Relay's write in flight: the output position
// a Relay advances is not on the Session's row, whose lock the receipt takes, so a
// receipt no longer queues behind a group of batches holding its locks across round
// trips. The receipt names the position committed when it was accepted.
func TestAReceiptDoesNotWaitForARelaysWriteInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)

	written, release := make(chan struct{}), make(chan struct{})
	relayDone := make(chan error, 1)
	go func() {
		relayDone <- st.InLeaseTx(ctx, f.session.ID, lease.Generation, func(tx *store.Store) error {
			if _, err := tx.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
				Parts: []store.NewPart{textPart("r1", "in flight")}}); err != nil {
				return err
			}
			close(written)
			<-release
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-relayDone:
		t.Fatalf("the Relay's write ended before it was held open: %v", err)
	}
	receiptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	accepted, err := st.AcceptInput(receiptCtx, store.NewInput{SessionID: f.session.ID, Content: "while the Relay writes"})
	close(release)
	require.NoError(t, err, "the receipt waited for the Relay's transaction")
	require.Equal(t, int64(0), accepted.OutputSeq, "the receipt names the position committed when it was accepted")
	require.NoError(t, <-relayDone)

	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.OutputSeq)
	require.Equal(t, int64(1), s.InputSeq)
}

func TestCursorCommitsWithItsParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)

	res, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Parts: []store.NewPart{textPart("r1", "a")}, Cursor: cursorAt("g1", 1)})
	require.NoError(t, err)
	cur, err := st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, res.LastSeq, cur.ThroughSeq)
	require.Equal(t, "g1", cur.Generation)
	require.Equal(t, lease.Generation, cur.LeaseGeneration)

	// A batch whose second part is refused (a frame must be a JSON object) rolls back
	// the first part and the cursor together.
	bad := store.NewPart{Frame: json.RawMessage(`"not an object"`)}
	_, err = st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Parts: []store.NewPart{textPart("r1", "b"), bad}, Cursor: cursorAt("g1", 3)})
	require.Error(t, err)
	cur, err = st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":1}`, string(cur.Position))
	parts, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, parts, 1)

	// The same holds when the caller's own transaction fails after the append.
	err = st.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
			Parts: []store.NewPart{textPart("r1", "c")}, Cursor: cursorAt("g2", 0)}); err != nil {
			return err
		}
		return fmt.Errorf("later step failed")
	})
	require.ErrorContains(t, err, "later step failed")
	cur, err = st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, "g1", cur.Generation)
	s, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.OutputSeq)

	// A cursor-only commit (an event with no browser part) moves the cursor alone.
	res, err = st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Cursor: cursorAt("g1", 2)})
	require.NoError(t, err)
	require.Equal(t, store.AppendResult{FirstSeq: 1, LastSeq: 1, Parts: 0}, res, "no part appended")
	cur, err = st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":2}`, string(cur.Position))
}

// TestAnInputToAnEndedSessionIsAnnouncedWithoutItsContent: a message accepted into an
// archived or deleted Session is announced without its content, so a Relay whose
// runtime is still being torn down reads custody, which hands none of it over, rather
// than run it from the notice.
func TestAnInputToAnEndedSessionIsAnnouncedWithoutItsContent(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(*store.Store, context.Context, string) (store.Session, error){
		"archived": (*store.Store).ArchiveSession,
		"deleted":  (*store.Store).DeleteSession,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			conn := f.listen(t, pubsub.SessionInputsChannel(f.session.ID))
			_, err := end(f.st, f.ctx, f.session.ID)
			require.NoError(t, err)
			in, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "anyone there?"})
			require.NoError(t, err)
			notice, err := pubsub.ParseInputNotice(nextPayload(f.ctx, t, conn, pubsub.SessionInputsChannel(f.session.ID)))
			require.NoError(t, err)
			require.Equal(t, pubsub.InputNotice{Seq: in.Seq, ID: in.ID}, notice)
		})
	}
}

func TestAppendNotifiesAtCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	conn := f.listen(t, pubsub.SessionOutputChannel(f.session.ID), pubsub.SessionInputsChannel(f.session.ID))

	// accept accepts an input and returns it with the notice it was announced by.
	accept := func(content string) (store.Input, pubsub.InputNotice) {
		in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: content})
		require.NoError(t, err)
		notice, err := pubsub.ParseInputNotice(nextPayload(ctx, t, conn, pubsub.SessionInputsChannel(f.session.ID)))
		require.NoError(t, err)
		return in, notice
	}
	in, inNotice := accept("hi")
	require.Equal(t, pubsub.InputNotice{Seq: in.Seq, ID: in.ID, Content: "hi", Carried: true}, inNotice, "an input is announced with its content")
	// Content too big for a notification is left for a read; the biggest that fits,
	// in multi-byte characters, is carried whole.
	in, inNotice = accept(strings.Repeat("é", pubsub.MaxNoticeContent/2+1))
	require.Equal(t, pubsub.InputNotice{Seq: in.Seq, ID: in.ID}, inNotice)
	fits := strings.Repeat("é", pubsub.MaxNoticeContent/2)
	in, inNotice = accept(fits)
	require.Equal(t, pubsub.InputNotice{Seq: in.Seq, ID: in.ID, Content: fits, Carried: true}, inNotice)

	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)
	res, err := st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Parts: []store.NewPart{textPart("r1", "a"), textPart("r1", "b"), textPart("r1", "c")}})
	require.NoError(t, err)
	notice, err := pubsub.ParseOutputNotice(nextPayload(ctx, t, conn, pubsub.SessionOutputChannel(f.session.ID)))
	require.NoError(t, err)
	require.Equal(t, res.LastSeq, notice.Seq)
	require.Equal(t, res.FirstSeq, notice.FirstSeq(), "a transaction's append announces its frames too")
	stored, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, notice.Frames, len(stored))
	for i, p := range stored {
		require.Equal(t, string(p.Frame), string(notice.Frames[i]), "part %d is announced as the log returns it", p.Seq)
	}
}

// TestPartsOnlyBatchNotifiesItsFramesAsStored: a Relay batch of parts alone announces
// its parts' frames with the seq, in the text a read of the log returns (jsonb's), so a
// stream can send them without reading them back; a batch too big for a notification
// announces its seq alone.
func TestPartsOnlyBatchNotifiesItsFramesAsStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	conn := f.listen(t, pubsub.SessionOutputChannel(f.session.ID))
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "r", TTL: time.Minute})
	require.NoError(t, err)
	nested := store.NewPart{Frame: json.RawMessage(`{"type":"data-x","data":{"zeta":1,"alpha":"\u00e9"}}`)}
	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{{Part: ptr(textPart("r1", "a"))}, {Part: &nested}}})
	require.NoError(t, err)
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	notice, err := pubsub.ParseOutputNotice(n.Payload)
	require.NoError(t, err)
	require.Equal(t, res.LastSeq, notice.Seq)
	require.Equal(t, res.FirstSeq, notice.FirstSeq())
	stored, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, notice.Frames, len(stored))
	for i, p := range stored {
		require.Equal(t, string(p.Frame), string(notice.Frames[i]), "part %d is announced as the log returns it", p.Seq)
	}

	big := make([]store.RelayOp, 0, 200)
	for range 200 {
		big = append(big, store.RelayOp{Part: ptr(textPart("r1", strings.Repeat("x", 60)))})
	}
	res, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: big})
	require.NoError(t, err)
	n, err = conn.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(res.LastSeq, 10), n.Payload, "frames too big for a notification are left for a read")
}

// listen opens a connection of its own listening on channels, closed with the test.
// nextPayload waits for conn's next notification, which is to be on channel, and
// returns its payload.
func nextPayload(ctx context.Context, t *testing.T, conn *pgx.Conn, channel string) string {
	t.Helper()
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, channel, n.Channel)
	return n.Payload
}

func (f *fixture) listen(t *testing.T, channels ...string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(f.ctx, f.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.WithoutCancel(f.ctx)) })
	for _, ch := range channels {
		_, err = conn.Exec(f.ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize())
		require.NoError(t, err)
	}
	return conn
}

// TestTheOutputLogHoldsOnlyLiveSessionsParts: the output log has no foreign key (it
// cost a check per part), yet it holds parts of existing Sessions only. A batch for a
// Session that does not exist writes nothing, and a deleted Session takes its parts
// with it.
func TestTheOutputLogHoldsOnlyLiveSessionsParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	countParts := func(sessionID string) int {
		var n int
		require.NoError(t, store.QueryRowForTest(ctx, st, `SELECT count(*) FROM output_parts WHERE session_id = $1`, sessionID, &n))
		return n
	}
	appendTwo := func(sessionID string) {
		lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: sessionID, Holder: "r", TTL: time.Minute})
		require.NoError(t, err)
		_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: sessionID, LeaseGeneration: lease.Generation,
			Ops: []store.RelayOp{{Part: ptr(textPart("r1", "a"))}, {Part: ptr(textPart("r1", "b"))}}})
		require.NoError(t, err)
		require.Equal(t, 2, countParts(sessionID))
	}

	missing := "00000000-0000-4000-8000-000000000001"
	_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: missing, LeaseGeneration: 1,
		Ops: []store.RelayOp{{Part: ptr(textPart("r1", "a"))}}})
	require.Error(t, err, "a batch for a Session that does not exist")
	require.Zero(t, countParts(missing))

	appendTwo(f.session.ID)
	other, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	appendTwo(other.ID)

	require.NoError(t, store.ExecForTest(ctx, st, `DELETE FROM sessions WHERE id = ?`, f.session.ID))
	require.Zero(t, countParts(f.session.ID), "a deleted Session's parts")
	require.Equal(t, 2, countParts(other.ID), "another Session's parts stay")

	require.NoError(t, store.ExecForTest(ctx, st, `DELETE FROM sessions WHERE agent_id = ?`, f.agent.ID))
	require.Zero(t, countParts(other.ID), "the parts of Sessions deleted together")
}
