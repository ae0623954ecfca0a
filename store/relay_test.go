package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func part(resp, frame string) store.RelayOp {
	return store.RelayOp{Part: &store.NewPart{ResponseID: &resp, Frame: json.RawMessage(frame)}}
}

func relayCursor(offset int) *store.CursorUpdate {
	return &store.CursorUpdate{Generation: "boot-1", Position: json.RawMessage(fmt.Sprintf(`{"offset":%d}`, offset))}
}

func TestApplyRelayBatchRecordsEveryFactWithItsParts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	reason := "end_turn"

	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{AdmitInput: in.ID},
			{Status: "working"},
			{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input", InputIDs: []string{in.ID}}},
			part("r1", `{"type":"start","messageId":"r1"}`),
			part("r1", `{"type":"text-delta","id":"t","delta":"hi"}`),
			{OpenInteraction: &store.InteractionOpening{InteractionID: "i1", ResponseID: ptr("r1"), Contract: json.RawMessage(`{"presentation":"decision"}`)}},
		},
		Cursor: relayCursor(5),
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.FirstSeq)
	require.Equal(t, int64(2), res.LastSeq)
	_, err = st.SaveInteractionAnswer(ctx, f.session.ID, "i1", json.RawMessage(`{"decision":"approve"}`), nil)
	require.NoError(t, err)

	res, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{CloseInteraction: &store.InteractionClosing{InteractionID: "i1", State: store.InteractionAnswered, Reason: "answered"}},
			part("r1", `{"type":"finish"}`),
			{EndResponse: &store.ResponseEnd{ResponseID: "r1", Outcome: store.OutcomeCompleted, NativeReason: &reason}},
			{Status: "idle"},
		},
		Cursor: relayCursor(9),
	})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.LastSeq)

	// Facts without parts move the cursor and leave the output position.
	res, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{{Status: "idle"}}, Cursor: relayCursor(12),
	})
	require.NoError(t, err)
	require.Equal(t, store.AppendResult{FirstSeq: 3, LastSeq: 3}, res)

	got, err := st.GetInputByID(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, got.State)
	resp, err := st.GetResponseByID(ctx, f.session.ID, "r1")
	require.NoError(t, err)
	require.Equal(t, int64(1), resp.StartedSeq, "a response starts at its start part")
	require.Equal(t, int64(3), *resp.EndedSeq, "and ends at its finish part")
	require.Equal(t, store.OutcomeCompleted, *resp.Outcome)
	it, err := st.GetInteractionByID(ctx, f.session.ID, "i1")
	require.NoError(t, err)
	require.Equal(t, store.InteractionAnswered, it.State)
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, "idle", *sess.RuntimeStatus)
	require.Equal(t, int64(3), sess.OutputSeq)
	cur, err := st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":12}`, string(cur.Position))
	require.Equal(t, int64(3), cur.ThroughSeq)
}

// A zombie Relay (its lease superseded by a new reader) writes nothing: not its
// parts, not its facts, not its cursor.
func TestZombieRelayWritesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	zombie, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-a/relay", TTL: time.Minute})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: zombie.Generation,
		Ops: []store.RelayOp{part("r0", `{"type":"start","messageId":"r0"}`)}, Cursor: relayCursor(1)})
	require.NoError(t, err)

	// The workflow starts a new Relay elsewhere, which steals the lease.
	fresh, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-b/relay", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	require.Greater(t, fresh.Generation, zombie.Generation)

	reason := "end_turn"
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: zombie.Generation,
		Ops: []store.RelayOp{
			{AdmitInput: in.ID},
			{StartResponse: &store.ResponseStart{ResponseID: "rz", Origin: "input"}},
			part("rz", `{"type":"text-delta","id":"t","delta":"zombie"}`),
			{EndResponse: &store.ResponseEnd{ResponseID: "r0", Outcome: store.OutcomeCompleted, NativeReason: &reason}},
			{Status: "idle"},
		},
		Cursor: relayCursor(99),
	})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	_, err = st.ReconcileRuntime(ctx, store.Reconciliation{SessionID: f.session.ID, LeaseGeneration: zombie.Generation, AdmitInputs: []string{in.ID}})
	require.ErrorIs(t, err, store.ErrLeaseLost)

	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), sess.OutputSeq, "no part of the zombie was appended")
	require.Nil(t, sess.RuntimeStatus)
	got, err := st.GetInputByID(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputPending, got.State, "the zombie did not close custody")
	_, err = st.GetResponseByID(ctx, f.session.ID, "rz")
	require.ErrorIs(t, err, store.ErrNotFound)
	cur, err := st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":1}`, string(cur.Position), "the zombie's cursor was not committed")

	// The new reader writes after the zombie's last committed part, with no gap.
	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: fresh.Generation,
		Ops: []store.RelayOp{part("r0", `{"type":"finish"}`)}, Cursor: relayCursor(2)})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.FirstSeq)
}

func TestReconcileRuntimeFailsLostResponsesAndKeepsReportedOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	var inputs []store.Input
	for range 3 {
		in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "m"})
		require.NoError(t, err)
		inputs = append(inputs, in)
	}
	moved, err := st.MarkInputsDeliveredTo(ctx, f.session.ID, []string{inputs[0].ID, inputs[1].ID, inputs[2].ID}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(3), moved)
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay", TTL: time.Minute})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{
		{StartResponse: &store.ResponseStart{ResponseID: "lost", Origin: "input"}},
		part("lost", `{"type":"start","messageId":"lost"}`),
		{StartResponse: &store.ResponseStart{ResponseID: "kept", Origin: "engine"}},
		part("kept", `{"type":"start","messageId":"kept"}`),
		{OpenInteraction: &store.InteractionOpening{InteractionID: "answered", Contract: json.RawMessage(`{}`)}},
		{OpenInteraction: &store.InteractionOpening{InteractionID: "forgotten", Contract: json.RawMessage(`{}`)}},
		{OpenInteraction: &store.InteractionOpening{InteractionID: "pending", Contract: json.RawMessage(`{}`)}},
	}})
	require.NoError(t, err)
	_, err = st.SaveInteractionAnswer(ctx, f.session.ID, "answered", json.RawMessage(`{"decision":"approve"}`), nil)
	require.NoError(t, err)

	res, err := st.ReconcileRuntime(ctx, store.Reconciliation{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		FailResponses: []store.FailedResponse{{ResponseID: "lost", Parts: []store.NewPart{
			{ResponseID: ptr("lost"), Frame: json.RawMessage(`{"type":"error","errorText":"lost"}`)},
			{ResponseID: ptr("lost"), Frame: json.RawMessage(`{"type":"finish","finishReason":"error"}`)},
		}}},
		CloseInteractions: []store.InteractionClosing{
			{InteractionID: "answered", State: store.InteractionAnswered, Reason: "answered"},
			{InteractionID: "forgotten", State: store.InteractionExpired, Reason: "expired"},
		},
		AdmitInputs: []string{inputs[0].ID},
		TakeBack:    true, KeepQueued: []string{inputs[1].ID},
		Status: "working",
		Cursor: relayCursor(40),
	})
	require.NoError(t, err)
	require.Equal(t, int64(4), res.LastSeq)

	lost, err := st.GetResponseByID(ctx, f.session.ID, "lost")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeFailed, *lost.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *lost.NativeReason)
	require.Equal(t, int64(4), *lost.EndedSeq)
	kept, err := st.GetResponseByID(ctx, f.session.ID, "kept")
	require.NoError(t, err)
	require.Nil(t, kept.Outcome, "a response the runtime still reports stays open")
	for id, want := range map[string]string{"answered": store.InteractionAnswered, "forgotten": store.InteractionExpired, "pending": store.InteractionOpen} {
		it, err := st.GetInteractionByID(ctx, f.session.ID, id)
		require.NoError(t, err)
		require.Equal(t, want, it.State, id)
	}
	// Custody: admitted closes, the queued one stays with generation 1, the other
	// is deliverable again (to the same runtime generation too).
	deliverable, err := st.ListDeliverableInputs(ctx, f.session.ID, 1)
	require.NoError(t, err)
	require.Len(t, deliverable, 1)
	require.Equal(t, inputs[2].ID, deliverable[0].ID)

	// Reconciling again changes nothing: a repeated reconciliation is harmless.
	res2, err := st.ReconcileRuntime(ctx, store.Reconciliation{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		FailResponses: []store.FailedResponse{{ResponseID: "lost", Parts: []store.NewPart{{ResponseID: ptr("lost"), Frame: json.RawMessage(`{"type":"finish"}`)}}}}})
	require.NoError(t, err)
	require.Equal(t, int64(4), res2.LastSeq, "an ended response gets no second ending")
}

func TestDeliverableInputsGoOnlyToAReplacementUntilAdmitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	a, b := f.input(t, "a"), f.input(t, "b")

	ids := func(gen int64) []string {
		in, err := st.ListDeliverableInputs(ctx, f.session.ID, gen)
		require.NoError(t, err)
		var out []string
		for _, i := range in {
			out = append(out, i.ID)
		}
		return out
	}
	require.Equal(t, []string{a.ID, b.ID}, ids(1), "accepted order")
	_, err := st.MarkInputsDeliveredTo(ctx, f.session.ID, []string{a.ID}, 1)
	require.NoError(t, err)
	require.Equal(t, []string{b.ID}, ids(1), "never twice to the same runtime")
	require.Equal(t, []string{a.ID, b.ID}, ids(2), "a replacement receives every unadmitted input in order")
	moved, err := st.MarkInputsDeliveredTo(ctx, f.session.ID, []string{a.ID}, 2)
	require.NoError(t, err)
	require.Equal(t, int64(1), moved, "to the replacement")
	moved, err = st.MarkInputsDeliveredTo(ctx, f.session.ID, []string{a.ID}, 1)
	require.NoError(t, err)
	require.Zero(t, moved, "a late record of the earlier runtime moves nothing back")
	require.Equal(t, []string{b.ID}, ids(2))
	_, err = st.MarkInputsAdmitted(ctx, f.session.ID, []string{a.ID})
	require.NoError(t, err)
	require.Equal(t, []string{b.ID}, ids(2), "after admission, never again")

	failed, err := st.FailHeldInputs(ctx, f.session.ID, store.InputFailureConversationEnded, "archived")
	require.NoError(t, err)
	require.Equal(t, []string{b.ID}, failed)
	got, err := st.GetInputByID(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputFailed, got.State)
	require.Equal(t, store.InputFailureConversationEnded, *got.FailureCode)
}

func TestPlaceRuntimeFencesActivationOfAnOlderGeneration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	g1, err := st.PlaceRuntime(ctx, f.session.ID, "box-1")
	require.NoError(t, err)
	g2, err := st.PlaceRuntime(ctx, f.session.ID, "box-2")
	require.NoError(t, err)
	require.Equal(t, g1+1, g2)
	err = st.RecordRuntimeActive(ctx, store.RuntimeActivation{SessionID: f.session.ID, RuntimeGeneration: g1, HostTaskQueue: "q", EngineSessionKey: "k"})
	require.ErrorIs(t, err, store.ErrLeaseLost, "an older placement cannot claim the Session")
	require.NoError(t, st.RecordRuntimeActive(ctx, store.RuntimeActivation{SessionID: f.session.ID, RuntimeGeneration: g2, HostTaskQueue: "q2", EngineSessionKey: "k", ResumeMaterial: []byte(`{"a":1}`)}))
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, store.LifecycleActive, sess.Lifecycle)
	require.Equal(t, "box-2", *sess.SandboxID)
	require.Equal(t, "q2", *sess.HostTaskQueue)
	require.JSONEq(t, `{"a":1}`, string(sess.ResumeMaterial))
}

func TestArchivedOrDeletedSessionsDeliverNothing(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"archive", "delete"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx, st := f.ctx, f.st
			held, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "before"})
			require.NoError(t, err)
			in, err := st.ListDeliverableInputs(ctx, f.session.ID, 1)
			require.NoError(t, err)
			require.Len(t, in, 1)
			if end == "archive" {
				_, err = st.ArchiveSession(ctx, f.session.ID)
			} else {
				_, err = st.DeleteSession(ctx, f.session.ID)
			}
			require.NoError(t, err)
			_, _, err = st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "after"})
			require.NoError(t, err)
			in, err = st.ListDeliverableInputs(ctx, f.session.ID, 1)
			require.NoError(t, err)
			require.Empty(t, in, "a live runtime being torn down must not take them")
			failed, err := st.FailHeldInputs(ctx, f.session.ID, store.InputFailureConversationEnded, "ended")
			require.NoError(t, err)
			require.Len(t, failed, 2)
			require.Equal(t, held.ID, failed[0])
		})
	}
}

// An interaction the runtime reports answered without an answer saved through the API
// (the program answered itself) is recorded withdrawn, never answered.
func TestAnsweredClosureWithoutASavedAnswerIsWithdrawn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input"}},
			part("r1", `{"type":"start","messageId":"r1"}`),
			{OpenInteraction: &store.InteractionOpening{InteractionID: "i1", ResponseID: ptr("r1"), Contract: json.RawMessage(`{"presentation":"decision"}`)}},
			{CloseInteraction: &store.InteractionClosing{InteractionID: "i1", State: store.InteractionAnswered, Reason: "answered"}},
		},
		Cursor: relayCursor(3),
	})
	require.NoError(t, err)
	it, err := st.GetInteractionByID(ctx, f.session.ID, "i1")
	require.NoError(t, err)
	require.Equal(t, store.InteractionWithdrawn, it.State)
	require.Equal(t, store.ClosureAnsweredWithoutAnswer, *it.ClosureReason)
	require.Nil(t, it.AnsweredBy)
}

// A batch of parts alone (a streaming reply) is written in one statement: the same
// fence, consecutive seqs, the cursor with them, parts of no response kept as such.
func TestRelayBatchOfPartsAloneIsFencedAndNumbered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	zombie, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-a/relay", TTL: time.Minute})
	require.NoError(t, err)
	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: zombie.Generation,
		Ops: []store.RelayOp{part("r1", `{"type":"text-delta","id":"t","delta":"a"}`), part("r1", `{"type":"text-delta","id":"t","delta":"b"}`)}, Cursor: relayCursor(5)})
	require.NoError(t, err)
	require.Equal(t, store.AppendResult{FirstSeq: 1, LastSeq: 2, Parts: 2}, res, "the parts counted, as the parts-committed metric reads them")

	fresh, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-b/relay", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: zombie.Generation,
		Ops: []store.RelayOp{part("r1", `{"type":"text-delta","id":"t","delta":"zombie"}`)}, Cursor: relayCursor(99)})
	require.ErrorIs(t, err, store.ErrLeaseLost)

	childStatus := store.RelayOp{Part: &store.NewPart{Frame: json.RawMessage(`{"type":"data-subagent","data":{"status":"stopped"}}`)}}
	res, err = st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: fresh.Generation,
		Ops: []store.RelayOp{part("r1", `{"type":"text-delta","id":"t","delta":"c"}`), childStatus}, Cursor: relayCursor(7)})
	require.NoError(t, err)
	require.Equal(t, store.AppendResult{FirstSeq: 3, LastSeq: 4, Parts: 2}, res, "after the zombie's last committed part, no gap")

	parts, err := st.ListOutputPartsAfter(ctx, f.session.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, parts, 4, "nothing of the zombie's refused batch")
	for i, p := range parts {
		require.Equal(t, int64(i+1), p.Seq)
	}
	require.JSONEq(t, `{"type":"text-delta","id":"t","delta":"c"}`, string(parts[2].Frame))
	require.Equal(t, "r1", *parts[2].ResponseID)
	require.Nil(t, parts[3].ResponseID, "a part of no response")
	cur, err := st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"offset":7}`, string(cur.Position))
	require.Equal(t, int64(4), cur.ThroughSeq)
	require.Equal(t, fresh.Generation, cur.LeaseGeneration)
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(4), sess.OutputSeq)
	require.NotNil(t, sess.LastOutputAt)
}

// A batch with facts is one transaction however its statements are sent: a fact that
// fails (the end of a response the Session never had) leaves nothing of the batch
// written, not the admission, the status, the parts or the cursor before it.
func TestARelayBatchWithAFailingFactWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	reason := "end_turn"

	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{AdmitInput: in.ID},
			{Status: "working"},
			{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input", InputIDs: []string{in.ID}}},
			part("r1", `{"type":"start","messageId":"r1"}`),
			{EndResponse: &store.ResponseEnd{ResponseID: "never-started", Outcome: store.OutcomeCompleted, NativeReason: &reason}},
		},
		Cursor: relayCursor(5),
	})
	require.ErrorIs(t, err, store.ErrNotFound)

	// A statement the database refuses (an interaction's contract must be an object)
	// rolls back the same way.
	_, err = st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{AdmitInput: in.ID},
			part("r1", `{"type":"start","messageId":"r1"}`),
			{OpenInteraction: &store.InteractionOpening{InteractionID: "i1", Contract: json.RawMessage(`"not an object"`)}},
		},
		Cursor: relayCursor(6),
	})
	require.Error(t, err)

	got, err := st.GetInputByID(ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputPending, got.State, "the admission was rolled back")
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Zero(t, sess.OutputSeq, "no part was appended")
	require.Nil(t, sess.RuntimeStatus)
	_, err = st.GetResponseByID(ctx, f.session.ID, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetRuntimeCursorBySession(ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "no cursor was saved")

	// The same batch without the failing fact is written whole.
	res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{
		SessionID: f.session.ID, LeaseGeneration: lease.Generation,
		Ops: []store.RelayOp{
			{AdmitInput: in.ID},
			{Status: "working"},
			{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input", InputIDs: []string{in.ID}}},
			part("r1", `{"type":"start","messageId":"r1"}`),
		},
		Cursor: relayCursor(5),
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 1}, []int64{res.FirstSeq, res.LastSeq, res.Parts})
	require.Len(t, res.Admitted, 1, "the admission's time in custody is reported")
}

// TestARelayBatchMirrorsTheSessionLogWithItsAdmission: an admission's batch carries
// the session log's new entries and commits them with the admission; a batch whose
// mirror counted more entries than the mirror holds is refused whole with
// ErrSessionLogBehind, its admission and parts with it.
func TestARelayBatchMirrorsTheSessionLogWithItsAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	first, second := f.input(t, "hello"), f.input(t, "again")
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	const stream = "session_log:conversation.jsonl"
	entries := []json.RawMessage{json.RawMessage(`{"input_id":"a"}`), json.RawMessage(`{"input_id":"b"}`)}

	// An admission's batch: the log's entries after the first after, the admission and
	// the reply's first part.
	admit := func(in store.Input, after int64, offset int) error {
		_, err := st.ApplyRelayBatch(ctx, store.RelayBatch{
			SessionID: f.session.ID, LeaseGeneration: lease.Generation,
			Ops: []store.RelayOp{
				{SessionLog: &store.SessionLogAppend{Stream: stream, After: after, Entries: entries}},
				{AdmitInput: in.ID},
				part("resp-"+in.ID, `{"type":"start"}`),
			},
			Cursor: relayCursor(offset),
		})
		return err
	}

	require.NoError(t, admit(first, 0, 1))
	stored, err := st.ListSessionLogEntries(ctx, f.session.ID, stream)
	require.NoError(t, err)
	require.Len(t, stored, 2)
	got, err := st.GetInputByID(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, got.State)

	err = admit(second, 5, 2)
	require.ErrorIs(t, err, store.ErrSessionLogBehind)
	got, err = st.GetInputByID(ctx, second.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputPending, got.State, "the admission was rolled back")
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), sess.OutputSeq, "no part was appended")
	stored, err = st.ListSessionLogEntries(ctx, f.session.ID, stream)
	require.NoError(t, err)
	require.Len(t, stored, 2)
}

// TestARelayBatchOfSessionLogEntriesAloneIsAMirror: a batch of one log's entries and
// nothing else (a Relay's mirror after a reply's end) stores them after the count it
// names, nothing twice when it comes again, and is refused with ErrSessionLogBehind,
// writing nothing, when the mirror holds fewer entries than that count.
func TestARelayBatchOfSessionLogEntriesAloneIsAMirror(t *testing.T) {
	f := newFixture(t)
	st, ctx := f.st, f.ctx
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-a", TTL: time.Minute})
	require.NoError(t, err)
	const stream = "session_log:conversation.jsonl"
	mirror := func(after int64, entries ...string) error {
		raw := make([]json.RawMessage, len(entries))
		for i, e := range entries {
			raw[i] = json.RawMessage(`{"turn":"` + e + `"}`)
		}
		res, err := st.ApplyRelayBatch(ctx, store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: lease.Generation,
			Ops: []store.RelayOp{{SessionLog: &store.SessionLogAppend{Stream: stream, After: after, Entries: raw}}}})
		require.Zero(t, res.Parts)
		return err
	}
	turns := func() []string {
		stored, err := st.ListSessionLogEntries(ctx, f.session.ID, stream)
		require.NoError(t, err)
		var out []string
		for _, e := range stored {
			out = append(out, string(e.Entry))
		}
		return out
	}

	require.NoError(t, mirror(0, "a", "b"))
	require.NoError(t, mirror(1, "b", "c"), "a mirror that comes again stores nothing twice")
	require.Equal(t, []string{`{"turn": "a"}`, `{"turn": "b"}`, `{"turn": "c"}`}, turns())
	require.ErrorIs(t, mirror(5, "f"), store.ErrSessionLogBehind)
	require.Len(t, turns(), 3, "a refused mirror writes nothing")
	sess, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.Zero(t, sess.OutputSeq, "a mirror is no output")
}
