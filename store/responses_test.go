package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestResponsesStartEndAndReconcile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	before, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)

	r, created, err := st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-1", Origin: store.OriginInput, InputIDs: []string{"i1"}, StartedSeq: 1})
	require.NoError(t, err)
	require.True(t, created)
	require.JSONEq(t, `["i1"]`, string(r.InputIDs))
	r, created, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-1", Origin: store.OriginInput, InputIDs: []string{"i1", "i2"}, StartedSeq: 1})
	require.NoError(t, err)
	require.False(t, created)
	require.JSONEq(t, `["i1","i2"]`, string(r.InputIDs), "another input joined the open response")

	open, err := st.ListOpenResponses(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, open, 1)
	_, err = st.GetLastEndedResponse(ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	ended, err := st.EndResponse(ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "resp-1", Outcome: store.OutcomeCompleted,
		NativeReason: ptr("end_turn"), Usage: json.RawMessage(`{"input_tokens":3}`), EndedSeq: 9})
	require.NoError(t, err)
	require.True(t, ended)
	ended, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "resp-1", Outcome: store.OutcomeFailed, EndedSeq: 10})
	require.NoError(t, err)
	require.False(t, ended, "the first end stands")
	_, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "nope", Outcome: store.OutcomeFailed, EndedSeq: 1})
	require.ErrorIs(t, err, store.ErrNotFound)

	last, err := st.GetLastEndedResponse(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	require.Equal(t, "end_turn", *last.NativeReason)
	require.Equal(t, int64(9), *last.EndedSeq)
	require.JSONEq(t, `{"input_tokens":3}`, string(last.Usage))
	require.Empty(t, last.Error, "no error recorded for a completed response")
	after, err := st.GetSessionByID(ctx, f.session.ID)
	require.NoError(t, err)
	require.True(t, after.LastActivityAt.After(before.LastActivityAt), "an ended response moves the Session up the list")

	// A start replayed after the end changes nothing.
	r, created, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-1", Origin: store.OriginInput, StartedSeq: 1})
	require.NoError(t, err)
	require.False(t, created)
	require.NotNil(t, r.Outcome)

	// Reconciliation after a confirmed runtime loss fails only the open ones.
	_, _, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-2", Origin: store.OriginEngine, StartedSeq: 10})
	require.NoError(t, err)
	failed, err := st.FailOpenResponses(ctx, f.session.ID, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"resp-2"}, failed)
	r2, err := st.GetResponseByID(ctx, f.session.ID, "resp-2")
	require.NoError(t, err)
	require.Equal(t, store.OutcomeFailed, *r2.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *r2.NativeReason)
	require.Equal(t, int64(10), *r2.EndedSeq, "an end never precedes its start")

	// A failed end keeps the program's error.
	_, _, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-3", Origin: store.OriginInput, StartedSeq: 11})
	require.NoError(t, err)
	ended, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "resp-3", Outcome: store.OutcomeFailed,
		Error: json.RawMessage(`{"message":"overloaded"}`), EndedSeq: 12})
	require.NoError(t, err)
	require.True(t, ended)
	r3, err := st.GetResponseByID(ctx, f.session.ID, "resp-3")
	require.NoError(t, err)
	require.JSONEq(t, `{"message":"overloaded"}`, string(r3.Error))
	require.Nil(t, r3.NativeReason)
	require.Empty(t, r3.Usage)

	_, _, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "bad", Origin: "guess", StartedSeq: 1})
	require.Error(t, err, "origin is a closed vocabulary")
}

func TestInteractionsOpenAnswerClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	contract := json.RawMessage(`{"kind":"tool_approval","tool":"Bash"}`)

	it, created, err := st.OpenInteraction(ctx, store.InteractionOpening{SessionID: f.session.ID, InteractionID: "ia-1", ResponseID: ptr("resp-1"), Contract: contract})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.InteractionOpen, it.State)
	_, created, err = st.OpenInteraction(ctx, store.InteractionOpening{SessionID: f.session.ID, InteractionID: "ia-1", Contract: contract})
	require.NoError(t, err)
	require.False(t, created)

	saved, err := st.SaveInteractionAnswer(ctx, f.session.ID, "ia-1", json.RawMessage(`{"decision":"approve"}`), &f.user.ID)
	require.NoError(t, err)
	require.Equal(t, store.InteractionOpen, saved.State, "a saved answer is not the runtime's acceptance")
	require.JSONEq(t, `{"decision":"approve"}`, string(saved.Answer))
	_, err = st.SaveInteractionAnswer(ctx, f.session.ID, "ia-1", json.RawMessage(`{"decision":"deny"}`), nil)
	require.ErrorIs(t, err, store.ErrInteractionNotOpen)

	closed, err := st.CloseInteraction(ctx, f.session.ID, "ia-1", store.InteractionAnswered, "answered")
	require.NoError(t, err)
	require.True(t, closed)
	closed, err = st.CloseInteraction(ctx, f.session.ID, "ia-1", store.InteractionWithdrawn, "late")
	require.NoError(t, err)
	require.False(t, closed)
	_, err = st.CloseInteraction(ctx, f.session.ID, "nope", store.InteractionExpired, "x")
	require.ErrorIs(t, err, store.ErrNotFound)

	_, _, err = st.OpenInteraction(ctx, store.InteractionOpening{SessionID: f.session.ID, InteractionID: "ia-2", Contract: contract})
	require.NoError(t, err)
	openList, err := st.ListOpenInteractions(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, openList, 1)
	expired, err := st.ExpireOpenInteractions(ctx, f.session.ID, "no closure receipt")
	require.NoError(t, err)
	require.Equal(t, []string{"ia-2"}, expired)
	_, err = st.SaveInteractionAnswer(ctx, f.session.ID, "ia-2", json.RawMessage(`{}`), nil)
	require.ErrorIs(t, err, store.ErrInteractionNotOpen)
}

func TestStreamPositionSaysTheHeadAndWhetherAResponseIsOpenAtTheCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "host-a", TTL: time.Minute})
	require.NoError(t, err)

	// Both readings of the position, alone and with the Session, agree.
	positionAt := func(after int64) (store.StreamPosition, error) {
		pos, err := st.StreamPositionAt(ctx, f.session.ID, after)
		if err != nil {
			return pos, err
		}
		sess, withSession, err := st.GetSessionAtStreamPosition(ctx, f.session.ID, after)
		require.NoError(t, err)
		require.Equal(t, f.session.ID, sess.ID)
		require.Equal(t, pos, withSession, "the Session's reading at %d", after)
		require.Equal(t, sess.OutputSeq, pos.OutputSeq)
		return pos, nil
	}
	pos, err := positionAt(0)
	require.NoError(t, err)
	require.Equal(t, store.StreamPosition{}, pos, "a fresh Session: nothing written, nothing open")

	_, _, err = st.StartResponse(ctx, store.ResponseStart{SessionID: f.session.ID, ResponseID: "resp-1", Origin: store.OriginInput, StartedSeq: 1})
	require.NoError(t, err)
	_, err = st.AppendParts(ctx, store.AppendRequest{SessionID: f.session.ID, LeaseGeneration: lease.Generation, Parts: []store.NewPart{
		{ResponseID: ptr("resp-1"), Frame: json.RawMessage(`{"type":"start"}`)},
		textPart("resp-1", "hi"),
		{ResponseID: ptr("resp-1"), Frame: json.RawMessage(`{"type":"finish"}`)},
	}})
	require.NoError(t, err)

	pos, err = positionAt(0)
	require.NoError(t, err)
	require.Equal(t, store.StreamPosition{OutputSeq: 3}, pos, "before the response's first part the cursor is outside it")
	pos, err = positionAt(2)
	require.NoError(t, err)
	require.Equal(t, store.StreamPosition{OutputSeq: 3, InResponse: true}, pos, "a cursor inside a response not ended")

	_, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "resp-1", Outcome: store.OutcomeCompleted, EndedSeq: 3})
	require.NoError(t, err)
	pos, err = positionAt(2)
	require.NoError(t, err)
	require.True(t, pos.InResponse, "a cursor before the response's end is inside it")
	pos, err = positionAt(3)
	require.NoError(t, err)
	require.Equal(t, store.StreamPosition{OutputSeq: 3}, pos, "a cursor at the head, after the response ended")

	_, err = st.StreamPositionAt(ctx, "00000000-0000-0000-0000-000000000000", 0)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = st.GetSessionAtStreamPosition(ctx, "00000000-0000-0000-0000-000000000000", 0)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestSessionDetailsAreReadAtOneMoment: each message is admitted and answered in one
// transaction, then its answer ended, while the details are read over and over. Every
// read accounts for every accepted message: held, answered by an open response, or
// answered by the latest ended one; read one after another, the rows would miss a
// message admitted between two reads and show the Session idle while it works.
func TestSessionDetailsAreReadAtOneMoment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st, id := f.ctx, f.st, f.session.ID
	const messages = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range messages {
			a, err := st.AcceptInput(ctx, store.NewInput{SessionID: id, Content: "hello"})
			if err != nil {
				t.Error(err)
				return
			}
			responseID := fmt.Sprintf("resp-%d", i)
			err = st.InTx(ctx, func(tx *store.Store) error {
				if _, err := tx.AdmitInputs(ctx, id, []string{a.Input.ID}); err != nil {
					return err
				}
				_, _, err := tx.StartResponse(ctx, store.ResponseStart{SessionID: id, ResponseID: responseID, Origin: store.OriginInput,
					InputIDs: []string{a.Input.ID}, StartedSeq: int64(i + 1)})
				return err
			})
			if err == nil {
				_, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: id, ResponseID: responseID, Outcome: store.OutcomeCompleted, EndedSeq: int64(i + 1)})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			require.Positive(t, reads)
			return
		default:
		}
		d, err := st.GetSessionDetailsByID(ctx, id)
		require.NoError(t, err)
		if d.Session.InputSeq == 0 || len(d.HeldInputs) > 0 || len(d.OpenResponses) > 0 {
			continue
		}
		require.NotNil(t, d.LastResponse, "read %d: %d messages accepted, none held or answered", reads, d.Session.InputSeq)
		var answered []string
		require.NoError(t, json.Unmarshal(d.LastResponse.InputIDs, &answered))
		require.Len(t, answered, 1)
		in, err := st.GetInputByID(ctx, answered[0])
		require.NoError(t, err)
		require.Equal(t, d.Session.InputSeq, in.Seq, "read %d: the latest message is held or answered", reads)
	}
}
