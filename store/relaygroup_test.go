package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// TestPartsGroupCommitsEachSessionUnderItsOwnFence: one group statement writes three
// Sessions' batches: each at the seqs after its Session's own, with its cursor and its
// notification; a batch whose lease generation was superseded writes nothing and
// gets ErrLeaseLost while the others commit.
func TestPartsGroupCommitsEachSessionUnderItsOwnFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	sessions, _, leases := groupSessions(t, f, 3)
	conn, channels := fenceOffTheThirdAndListen(t, f, sessions, leases, "r1")
	batch := func(i int, texts ...string) store.RelayBatch {
		b := store.RelayBatch{SessionID: sessions[i], LeaseGeneration: leases[i], Cursor: cursorAt(fmt.Sprintf("g%d", i), len(texts))}
		for _, text := range texts {
			b.Ops = append(b.Ops, store.RelayOp{Part: ptr(textPart("r1", text))})
		}
		return b
	}
	res, errs, err := store.AppendPartsGroupForTest(ctx, st, []store.RelayBatch{batch(0, "c", "d"), batch(1, "x"), batch(2, "lost")})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, store.AppendResult{FirstSeq: 3, LastSeq: 4, Parts: 2}, res[0], "after the Session's own parts")
	require.NoError(t, errs[1])
	require.Equal(t, store.AppendResult{FirstSeq: 1, LastSeq: 1, Parts: 1}, res[1])
	require.ErrorIs(t, errs[2], store.ErrLeaseLost)

	for i, want := range [][]string{{"a", "b", "c", "d"}, {"x"}, nil} {
		parts, err := st.ListOutputPartsAfter(ctx, sessions[i], 0, 10)
		require.NoError(t, err)
		require.Len(t, parts, len(want), "session %d", i)
		for j, p := range parts {
			require.Equal(t, int64(j+1), p.Seq)
			require.JSONEq(t, string(textPart("r1", want[j]).Frame), string(p.Frame))
		}
	}
	cur, err := st.GetRuntimeCursorBySession(ctx, sessions[0])
	require.NoError(t, err)
	require.Equal(t, "g0", cur.Generation)
	require.Equal(t, int64(4), cur.ThroughSeq)
	_, err = st.GetRuntimeCursorBySession(ctx, sessions[2])
	require.ErrorIs(t, err, store.ErrNotFound, "a fenced-off batch writes no cursor")

	got := outputNotices(t, ctx, conn, 2)
	require.Equal(t, int64(4), got[channels[0]].Seq)
	require.Len(t, got[channels[0]].Frames, 2, "each notification carries its own Session's frames")
	require.Len(t, got[channels[1]].Frames, 1)
}

// TestConcurrentRelaysCommitEveryPartOnce: Relays of many Sessions recording parts at
// once, every third batch with the program's status beside them (grouped into shared
// statements and shared transactions), each get their parts at consecutive seqs,
// every part once, in order.
func TestConcurrentRelaysCommitEveryPartOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	const relays, batches = 12, 15
	var wg sync.WaitGroup
	ids := make([]string, relays)
	for r := range relays {
		s, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
		require.NoError(t, err)
		ids[r] = s.ID
		lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: s.ID, Holder: "r", TTL: time.Minute})
		require.NoError(t, err)
		wg.Go(func() {
			for b := range batches {
				ops := []store.RelayOp{{Part: ptr(textPart("r1", fmt.Sprintf("%d-a", b)))}, {Part: ptr(textPart("r1", fmt.Sprintf("%d-b", b)))}}
				if b%3 == 0 {
					ops = append(ops, store.RelayOp{Status: "working"})
				}
				res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: s.ID, LeaseGeneration: lease.Generation, Ops: ops})
				if !assertNoError(t, err) {
					return
				}
				if res.FirstSeq != int64(2*b+1) || res.LastSeq != int64(2*b+2) {
					t.Errorf("relay %d batch %d: seqs %d-%d", r, b, res.FirstSeq, res.LastSeq)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		parts, err := st.ListOutputPartsAfter(ctx, id, 0, 100)
		require.NoError(t, err)
		require.Len(t, parts, 2*batches)
		for i, p := range parts {
			require.Equal(t, int64(i+1), p.Seq)
			suffix := map[int]string{0: "a", 1: "b"}[i%2]
			require.JSONEq(t, string(textPart("r1", fmt.Sprintf("%d-%s", i/2, suffix)).Frame), string(p.Frame))
		}
	}
}

// groupSessions makes n Sessions of the fixture's user with an input each and takes
// their reader leases.
func groupSessions(t *testing.T, f *fixture, n int) (ids, inputs []string, leases []int64) {
	t.Helper()
	for range n {
		s, _, err := f.st.CreateSessionIdempotent(f.ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
		require.NoError(t, err)
		in, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: s.ID, Content: "hello"})
		require.NoError(t, err)
		l, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: s.ID, Holder: "r", TTL: time.Minute})
		require.NoError(t, err)
		ids, inputs, leases = append(ids, s.ID), append(inputs, in.ID), append(leases, l.Generation)
	}
	return ids, inputs, leases
}

// fenceOffTheThirdAndListen readies a group test's Sessions: the first gets two
// parts of the reply resp, the third's lease moves on (its old generation is fenced
// off), and every Session's output channel is listened on (returned).
func fenceOffTheThirdAndListen(t *testing.T, f *fixture, sessions []string, leases []int64, resp string) (*pgx.Conn, []string) {
	t.Helper()
	_, err := f.st.ApplyRelayBatch(f.ctx, store.RelayBatch{SessionID: sessions[0], LeaseGeneration: leases[0],
		Ops: []store.RelayOp{{Part: ptr(textPart(resp, "a"))}, {Part: ptr(textPart(resp, "b"))}}})
	require.NoError(t, err)
	_, err = f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: sessions[2], Holder: "r2", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	return f.listenToOutput(t, sessions)
}

// outputNotices waits for n output notifications on conn and returns the last of
// each channel.
func outputNotices(t *testing.T, ctx context.Context, conn *pgx.Conn, n int) map[string]pubsub.OutputNotice {
	t.Helper()
	got := map[string]pubsub.OutputNotice{}
	for range n {
		note, err := conn.WaitForNotification(ctx)
		require.NoError(t, err)
		notice, err := pubsub.ParseOutputNotice(note.Payload)
		require.NoError(t, err)
		got[note.Channel] = notice
	}
	return got
}

// listenToOutput listens on the Sessions' output channels, which it returns.
func (f *fixture) listenToOutput(t *testing.T, sessions []string) (*pgx.Conn, []string) {
	t.Helper()
	channels := make([]string, len(sessions))
	for i, id := range sessions {
		channels[i] = pubsub.SessionOutputChannel(id)
	}
	return f.listen(t, channels...), channels
}

// replyStart is a batch that admits input and starts the reply resp with two parts.
func replyStart(session string, lease int64, input, resp string) store.RelayBatch {
	return store.RelayBatch{SessionID: session, LeaseGeneration: lease, Cursor: relayCursor(2),
		Ops: []store.RelayOp{
			{AdmitInput: input},
			{Status: "working"},
			{StartResponse: &store.ResponseStart{ResponseID: resp, Origin: "input", InputIDs: []string{input}}},
			part(resp, `{"type":"start","messageId":"`+resp+`"}`),
			part(resp, `{"type":"text-delta","id":"t","delta":"hi"}`),
		}}
}

// TestFactsGroupCommitsEachSessionUnderItsOwnFence: one transaction writes four
// Sessions' batches with facts: each admission, status and reply start is its own
// Session's, each part at the seqs after its Session's own, with its cursor and its
// notification, and a batch without parts moves its cursor alone; a batch whose lease
// generation was superseded writes nothing and gets ErrLeaseLost while the others
// commit.
func TestFactsGroupCommitsEachSessionUnderItsOwnFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	sessions, inputs, leases := groupSessions(t, f, 4)
	conn, channels := fenceOffTheThirdAndListen(t, f, sessions, leases, "r0")

	batches := make([]store.RelayBatch, len(sessions))
	for i := range sessions {
		batches[i] = replyStart(sessions[i], leases[i], inputs[i], fmt.Sprintf("r%d", i+1))
	}
	// The first batch reports two statuses: the last stands.
	batches[0].Ops = append(batches[0].Ops, store.RelayOp{Status: "idle"})
	batches[3] = store.RelayBatch{SessionID: sessions[3], LeaseGeneration: leases[3], Ops: []store.RelayOp{{Status: "waiting"}}, Cursor: relayCursor(7)}
	res, errs, err := store.WriteRelayBatchesForTest(ctx, st, batches)
	require.NoError(t, err)
	require.NoError(t, errs[3])
	require.Equal(t, store.AppendResult{}, res[3], "a batch without parts leaves the output position")
	cur, err := st.GetRuntimeCursorBySession(ctx, sessions[3])
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":7}`, string(cur.Position))
	require.Zero(t, cur.ThroughSeq)
	sess, err := st.GetSessionByID(ctx, sessions[3])
	require.NoError(t, err)
	require.Equal(t, "waiting", *sess.RuntimeStatus)
	require.NoError(t, errs[0])
	require.Equal(t, []int64{3, 4, 2}, []int64{res[0].FirstSeq, res[0].LastSeq, res[0].Parts}, "after the Session's own parts")
	require.Len(t, res[0].Admitted, 1)
	require.NoError(t, errs[1])
	require.Equal(t, []int64{1, 2, 2}, []int64{res[1].FirstSeq, res[1].LastSeq, res[1].Parts})
	require.ErrorIs(t, errs[2], store.ErrLeaseLost)

	for i, startedSeq := range []int64{3, 1} {
		status := []string{"idle", "working"}[i]
		in, err := st.GetInputByID(ctx, inputs[i])
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, in.State, "session %d", i)
		resp, err := st.GetResponseByID(ctx, sessions[i], fmt.Sprintf("r%d", i+1))
		require.NoError(t, err)
		require.Equal(t, startedSeq, resp.StartedSeq, "session %d's reply starts at its own start part", i)
		sess, err := st.GetSessionByID(ctx, sessions[i])
		require.NoError(t, err)
		require.Equal(t, status, *sess.RuntimeStatus, "session %d", i)
		cur, err := st.GetRuntimeCursorBySession(ctx, sessions[i])
		require.NoError(t, err)
		require.Equal(t, res[i].LastSeq, cur.ThroughSeq)
	}
	in, err := st.GetInputByID(ctx, inputs[2])
	require.NoError(t, err)
	require.Equal(t, store.InputPending, in.State, "a fenced-off batch admits nothing")
	_, err = st.GetResponseByID(ctx, sessions[2], "r3")
	require.ErrorIs(t, err, store.ErrNotFound)
	sess, err = st.GetSessionByID(ctx, sessions[2])
	require.NoError(t, err)
	require.Zero(t, sess.OutputSeq)
	require.Nil(t, sess.RuntimeStatus)

	got := outputNotices(t, ctx, conn, 2)
	require.Equal(t, int64(4), got[channels[0]].Seq)
	require.Equal(t, int64(2), got[channels[1]].Seq)
}

// TestAFailingFactFailsOnlyItsOwnBatchOfAGroup: a fact that fails (the end of a reply
// its Session never had) fails the group's transaction, which writes nothing; the
// group's writer then writes each batch alone, so only the failing batch fails.
func TestAFailingFactFailsOnlyItsOwnBatchOfAGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	sessions, inputs, leases := groupSessions(t, f, 3)
	reason := "end_turn"
	batches := make([]store.RelayBatch, len(sessions))
	for i := range sessions {
		batches[i] = replyStart(sessions[i], leases[i], inputs[i], "r1")
	}
	batches[1].Ops = append(batches[1].Ops, store.RelayOp{EndResponse: &store.ResponseEnd{ResponseID: "never-started",
		Outcome: store.OutcomeCompleted, NativeReason: &reason}})

	_, _, err := store.WriteRelayBatchesForTest(ctx, st, batches)
	require.ErrorIs(t, err, store.ErrNotFound)
	for i := range sessions {
		in, err := st.GetInputByID(ctx, inputs[i])
		require.NoError(t, err)
		require.Equal(t, store.InputPending, in.State, "the group's transaction wrote nothing (session %d)", i)
	}

	res, errs := store.WriteFactsGroupForTest(ctx, st, batches)
	require.ErrorIs(t, errs[1], store.ErrNotFound)
	for _, i := range []int{0, 2} {
		require.NoError(t, errs[i])
		require.Equal(t, []int64{1, 2, 2}, []int64{res[i].FirstSeq, res[i].LastSeq, res[i].Parts})
		in, err := st.GetInputByID(ctx, inputs[i])
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, in.State)
	}
	in, err := st.GetInputByID(ctx, inputs[1])
	require.NoError(t, err)
	require.Equal(t, store.InputPending, in.State)
	sess, err := st.GetSessionByID(ctx, sessions[1])
	require.NoError(t, err)
	require.Zero(t, sess.OutputSeq)
}

// TestAGroupWritesEachKindOfFactForEveryBatch: a group's session-log entries,
// admissions, reply starts and ends go a kind at a time for its batches, each
// numbered from its own Session's output position, beside a batch whose facts go one
// by one (an interaction); a log mirror that counted more entries than its Session's
// log holds fails the group, and then only its own batch.
func TestAGroupWritesEachKindOfFactForEveryBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	sessions, inputs, leases := groupSessions(t, f, 3)
	before, err := st.GetSessionByID(ctx, sessions[0])
	require.NoError(t, err)
	reason := "end_turn"
	entry := func(text string) json.RawMessage { return json.RawMessage(`{"text":"` + text + `"}`) }
	wholeTurn := store.RelayBatch{SessionID: sessions[0], LeaseGeneration: leases[0], Cursor: relayCursor(4), Ops: []store.RelayOp{
		{SessionLog: &store.SessionLogAppend{Stream: "main", Entries: []json.RawMessage{entry("a"), entry("b")}}},
		{AdmitInput: inputs[0]},
		{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input", InputIDs: []string{inputs[0]}}},
		part("r1", `{"type":"start","messageId":"r1"}`),
		part("r1", `{"type":"text-delta","id":"t","delta":"hi"}`),
		part("r1", `{"type":"finish"}`),
		{EndResponse: &store.ResponseEnd{ResponseID: "r1", Outcome: store.OutcomeCompleted, NativeReason: &reason, Usage: json.RawMessage(`{"input_tokens":3}`)}},
		{Status: "idle"},
	}}
	replyOnly := replyStart(sessions[1], leases[1], inputs[1], "r1")
	replyOnly.Ops = append([]store.RelayOp{{SessionLog: &store.SessionLogAppend{Stream: "main", Entries: []json.RawMessage{entry("x")}}}}, replyOnly.Ops...)
	withInteraction := replyStart(sessions[2], leases[2], inputs[2], "r1")
	withInteraction.Ops = append(withInteraction.Ops, store.RelayOp{OpenInteraction: &store.InteractionOpening{InteractionID: "i1", ResponseID: ptr("r1"), Contract: json.RawMessage(`{"presentation":"decision"}`)}})

	res, errs, err := store.WriteRelayBatchesForTest(ctx, st, []store.RelayBatch{wholeTurn, replyOnly, withInteraction})
	require.NoError(t, err)
	for i := range sessions {
		require.NoError(t, errs[i], "session %d", i)
		require.Len(t, res[i].Admitted, 1, "session %d's admission", i)
		in, err := st.GetInputByID(ctx, inputs[i])
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, in.State, "session %d", i)
		resp, err := st.GetResponseByID(ctx, sessions[i], "r1")
		require.NoError(t, err)
		require.Equal(t, int64(1), resp.StartedSeq, "session %d's reply starts at its own start part", i)
	}
	require.Equal(t, []int64{1, 3, 3}, []int64{res[0].FirstSeq, res[0].LastSeq, res[0].Parts})
	resp, err := st.GetResponseByID(ctx, sessions[0], "r1")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *resp.Outcome)
	require.Equal(t, int64(3), *resp.EndedSeq, "a reply ends at its finish part")
	require.Equal(t, reason, *resp.NativeReason)
	require.JSONEq(t, `{"input_tokens":3}`, string(resp.Usage))
	sess, err := st.GetSessionByID(ctx, sessions[0])
	require.NoError(t, err)
	require.True(t, sess.LastActivityAt.After(before.LastActivityAt), "an ended reply moves its Session up its owner's list")
	require.Equal(t, "idle", *sess.RuntimeStatus)
	resp, err = st.GetResponseByID(ctx, sessions[1], "r1")
	require.NoError(t, err)
	require.Nil(t, resp.Outcome, "a reply that did not end stays open")
	for i, want := range []int{2, 1} {
		entries, err := st.ListSessionLogEntries(ctx, sessions[i], "main")
		require.NoError(t, err)
		require.Len(t, entries, want, "session %d's log", i)
	}
	it, err := st.GetInteractionByID(ctx, sessions[2], "i1")
	require.NoError(t, err)
	require.Equal(t, store.InteractionOpen, it.State)

	// The first Session's mirror now counts four entries where its log holds two.
	behind := store.RelayBatch{SessionID: sessions[0], LeaseGeneration: leases[0], Cursor: relayCursor(5), Ops: []store.RelayOp{
		{SessionLog: &store.SessionLogAppend{Stream: "main", After: 4, Entries: []json.RawMessage{entry("e")}}},
		{StartResponse: &store.ResponseStart{ResponseID: "r2", Origin: "engine"}},
		part("r2", `{"type":"start","messageId":"r2"}`),
	}}
	ending := store.RelayBatch{SessionID: sessions[1], LeaseGeneration: leases[1], Cursor: relayCursor(5), Ops: []store.RelayOp{
		{SessionLog: &store.SessionLogAppend{Stream: "main", After: 1, Entries: []json.RawMessage{entry("y")}}},
		part("r1", `{"type":"finish"}`),
		{EndResponse: &store.ResponseEnd{ResponseID: "r1", Outcome: store.OutcomeCompleted, NativeReason: &reason}},
	}}
	_, _, err = store.WriteRelayBatchesForTest(ctx, st, []store.RelayBatch{behind, ending})
	require.ErrorIs(t, err, store.ErrSessionLogBehind)
	res, errs = store.WriteFactsGroupForTest(ctx, st, []store.RelayBatch{behind, ending})
	require.ErrorIs(t, errs[0], store.ErrSessionLogBehind)
	_, err = st.GetResponseByID(ctx, sessions[0], "r2")
	require.ErrorIs(t, err, store.ErrNotFound, "a batch whose mirror is behind writes nothing")
	require.NoError(t, errs[1])
	require.Equal(t, []int64{3, 3, 1}, []int64{res[1].FirstSeq, res[1].LastSeq, res[1].Parts})
	resp, err = st.GetResponseByID(ctx, sessions[1], "r1")
	require.NoError(t, err)
	require.Equal(t, int64(3), *resp.EndedSeq)
	entries, err := st.ListSessionLogEntries(ctx, sessions[1], "main")
	require.NoError(t, err)
	require.Len(t, entries, 2)
}
