package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestBumpSessionActivityMovesTheSessionToTheTop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second, _, err := f.st.CreateSessionIdempotent(f.ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE sessions SET last_activity_at = now() - interval '1 hour' WHERE id = ?`, f.session.ID))

	list := func() []string {
		rows, err := f.st.ListSessionFactsByUser(f.ctx, store.SessionListQuery{UserID: f.user.ID, Limit: 10})
		require.NoError(t, err)
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids
	}
	assert.Equal(t, []string{second.ID, f.session.ID}, list())
	_, err = f.st.RenameSession(f.ctx, f.session.ID, f.user.ID, "renamed")
	require.NoError(t, err)
	assert.Equal(t, []string{second.ID, f.session.ID}, list(), "renaming does not move it")
	require.NoError(t, f.st.BumpSessionActivity(f.ctx, f.session.ID))
	assert.Equal(t, []string{f.session.ID, second.ID}, list(), "a finished response does")
	require.ErrorIs(t, f.st.BumpSessionActivity(f.ctx, "00000000-0000-0000-0000-000000000000"), store.ErrNotFound)
}

func TestSessionSummaryCountsOpenWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: "held"})
	require.NoError(t, err)
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `INSERT INTO responses (session_id, response_id, origin, started_seq) VALUES (?, 'r-1', 'input', 1)`, f.session.ID))
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `INSERT INTO interactions (session_id, interaction_id, contract) VALUES (?, 'i-1', '{}')`, f.session.ID))
	rows, err := f.st.ListSessionFactsByUser(f.ctx, store.SessionListQuery{UserID: f.user.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, 1, rows[0].OpenResponses)
	assert.Equal(t, 1, rows[0].OpenInteractions)
	assert.Equal(t, 1, rows[0].HeldInputs)
	one, err := f.st.GetSessionFactsByID(f.ctx, f.session.ID)
	require.NoError(t, err)
	assert.Equal(t, rows[0], one, "one Session's facts read as the list reads them")
	facts, err := f.st.GetSessionDetailsByID(f.ctx, f.session.ID)
	require.NoError(t, err)
	assert.Len(t, facts.OpenResponses, 1)
	assert.Len(t, facts.OpenInteractions, 1)
	assert.Len(t, facts.HeldInputs, 1)
	assert.Nil(t, facts.LastResponse)

	_, err = f.st.EndResponse(f.ctx, store.ResponseEnd{SessionID: f.session.ID, ResponseID: "r-1", Outcome: store.OutcomeCompleted, EndedSeq: 2})
	require.NoError(t, err)
	facts, err = f.st.GetSessionDetailsByID(f.ctx, f.session.ID)
	require.NoError(t, err)
	assert.Empty(t, facts.OpenResponses)
	require.NotNil(t, facts.LastResponse)
	assert.Equal(t, "r-1", facts.LastResponse.ResponseID)
	all, err := f.st.ListResponsesBySession(f.ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, all, 1)
}

func TestSessionWritesSayWhyTheyWereRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE sessions SET lifecycle = 'active', runtime_status = 'working' WHERE id = ?`, f.session.ID))
	_, err := f.st.ArchiveSession(f.ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrSessionBusy)
	_, err = f.st.DeleteSession(f.ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrSessionBusy)
	_, err = f.st.RecoverSession(f.ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrWrongLifecycle, "a working Session is not terminated, which is the reason")
	_, err = f.st.RenameSession(f.ctx, "00000000-0000-0000-0000-000000000000", f.user.ID, "x")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE sessions SET runtime_status = 'idle' WHERE id = ?`, f.session.ID))
	deleted, err := f.st.DeleteSession(f.ctx, f.session.ID)
	require.NoError(t, err)
	require.NotNil(t, deleted.DeletedAt)
	_, err = f.st.RenameSession(f.ctx, f.session.ID, f.user.ID, "x")
	require.ErrorIs(t, err, store.ErrWrongLifecycle)
	_, err = f.st.ArchiveSession(f.ctx, f.session.ID)
	require.ErrorIs(t, err, store.ErrWrongLifecycle, "a deleted Session is not archived")
	_, err = f.st.MarkSessionRead(f.ctx, f.session.ID, f.user.ID, time.Now())
	require.ErrorIs(t, err, store.ErrWrongLifecycle)

	// Another user's deleted Session is not touched by deleting this one again.
	other, _, err := f.st.CreateSessionIdempotent(f.ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	otherDeleted, err := f.st.DeleteSession(f.ctx, other.ID)
	require.NoError(t, err)

	// A deleted Session stays deleted, with its first time, whatever the program reports.
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE sessions SET runtime_status = 'working' WHERE id = ?`, f.session.ID))
	again, err := f.st.DeleteSession(f.ctx, f.session.ID)
	require.NoError(t, err, "deleting twice is not refused as busy")
	require.True(t, again.DeletedAt.Equal(*deleted.DeletedAt))
	require.Equal(t, f.session.ID, again.ID)
	untouched, err := f.st.GetSessionByID(f.ctx, other.ID)
	require.NoError(t, err)
	require.True(t, untouched.UpdatedAt.Equal(otherDeleted.UpdatedAt), "the guard's OR stays within one Session")
}
