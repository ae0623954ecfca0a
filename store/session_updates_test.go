package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/sessionstate"
	"github.com/astrabox/astrabox/store"
)

func TestNormalizeTitle(t *testing.T) {
	t.Parallel()
	got, err := store.NormalizeTitle("  Release\n\tchecklist   v2 ")
	require.NoError(t, err)
	require.Equal(t, "Release checklist v2", got)
	_, err = store.NormalizeTitle(" \n ")
	require.ErrorIs(t, err, store.ErrInvalidTitle)
	_, err = store.NormalizeTitle(strings.Repeat("é", 200))
	require.NoError(t, err, "200 characters, not bytes")
	_, err = store.NormalizeTitle(strings.Repeat("a", 201))
	require.ErrorIs(t, err, store.ErrInvalidTitle)
}

func TestSessionTitlesReadMarkersAndLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	id := f.session.ID

	set, err := st.SetAutoTitle(ctx, id, "Generated")
	require.NoError(t, err)
	require.True(t, set)
	renamed, err := st.RenameSession(ctx, id, f.user.ID, "Mine\n")
	require.NoError(t, err)
	require.Equal(t, "Mine", *renamed.Title)
	require.Equal(t, "user", *renamed.TitleSource)
	require.Equal(t, f.session.LastActivityAt, renamed.LastActivityAt, "renaming does not move the Session")
	set, err = st.SetAutoTitle(ctx, id, "Generated later")
	require.NoError(t, err)
	require.False(t, set, "an owner's title is never replaced")
	other, err := st.CreateUser(ctx, store.NewUser{Email: uniq("other") + "@example.com"})
	require.NoError(t, err)
	_, err = st.RenameSession(ctx, id, other.ID, "Theirs")
	require.ErrorIs(t, err, store.ErrNotFound, "only the owner renames")

	at := time.Now().UTC().Truncate(time.Microsecond)
	_, err = st.MarkSessionRead(ctx, id, f.user.ID, at)
	require.NoError(t, err)
	s, err := st.MarkSessionRead(ctx, id, f.user.ID, at.Add(-time.Hour))
	require.NoError(t, err)
	require.True(t, s.ReadAt.Equal(at), "read_at only moves forward")
	require.NoError(t, store.ExecForTest(ctx, st, `UPDATE sessions SET read_at = now() - interval '1 hour' WHERE id = ?`, id))
	s, err = st.MarkSessionRead(ctx, id, f.user.ID, time.Time{})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), *s.ReadAt, time.Minute, "a zero time reads now")

	placed, err := st.SetSessionPlacement(ctx, store.Placement{SessionID: id, SandboxID: "box-1", HostTaskQueue: "host-a", EngineSessionKey: ptr("native-1")})
	require.NoError(t, err)
	require.Equal(t, store.LifecycleActive, placed.Lifecycle)
	require.Equal(t, int64(1), placed.RuntimeGeneration)
	held, err := st.ReleaseSessionRuntime(ctx, id)
	require.NoError(t, err)
	require.Zero(t, held, "no Relay listened")
	s, err = st.GetSessionByID(ctx, id)
	require.NoError(t, err)
	require.True(t, s.RuntimeUnavailable)
	require.Nil(t, s.SandboxID)
	require.Equal(t, "native-1", *s.EngineSessionKey, "the conversation key survives the sandbox")

	require.NoError(t, st.SetRuntimeStatus(ctx, id, store.RuntimeWorking))
	_, err = st.ArchiveSession(ctx, id)
	require.ErrorIs(t, err, store.ErrSessionBusy)
	_, err = st.DeleteSession(ctx, id)
	require.ErrorIs(t, err, store.ErrSessionBusy)
	require.NoError(t, st.SetRuntimeStatus(ctx, id, store.RuntimeWaiting))
	archived, err := st.ArchiveSession(ctx, id)
	require.NoError(t, err, "waiting on a person is not working")
	require.NotNil(t, archived.ArchivedAt)
	deleted, err := st.DeleteSession(ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.LifecycleDeleted, deleted.Lifecycle)
	_, err = st.SetSessionLifecycle(ctx, id, store.LifecycleActive)
	require.ErrorIs(t, err, store.ErrNotFound, "DELETED is terminal")
	require.Error(t, st.SetRuntimeStatus(ctx, id, "sleeping"), "runtime_status is a closed vocabulary")
}

func TestSessionStateIsDerivedFromFacts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	id := f.session.ID
	state := func() sessionstate.State {
		t.Helper()
		facts, err := st.GetSessionFactsByID(ctx, id)
		require.NoError(t, err)
		return facts.State()
	}
	require.Equal(t, store.StateCreating, state())
	_, err := st.SetSessionLifecycle(ctx, id, store.LifecycleActive)
	require.NoError(t, err)
	require.Equal(t, store.StateReady, state())

	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: id, Content: "hi"})
	require.NoError(t, err)
	require.Equal(t, store.StateProcessing, state(), "a held input")
	_, err = st.MarkInputsAdmitted(ctx, id, []string{in.ID})
	require.NoError(t, err)
	_, _, err = st.StartResponse(ctx, store.ResponseStart{SessionID: id, ResponseID: "r1", Origin: store.OriginInput, InputIDs: []string{in.ID}, StartedSeq: 1})
	require.NoError(t, err)
	require.Equal(t, store.StateProcessing, state(), "an open response")
	_, _, err = st.OpenInteraction(ctx, store.InteractionOpening{SessionID: id, InteractionID: "q1", ResponseID: ptr("r1"), Contract: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, store.StateWaitingInput, state())
	_, err = st.CloseInteraction(ctx, id, "q1", store.InteractionAnswered, "answered")
	require.NoError(t, err)
	_, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: id, ResponseID: "r1", Outcome: store.OutcomeCompleted, EndedSeq: 2})
	require.NoError(t, err)
	require.NoError(t, st.SetRuntimeStatus(ctx, id, store.RuntimeWorking))
	require.Equal(t, store.StateProcessing, state(), "background work the program reports")
	require.NoError(t, st.SetRuntimeStatus(ctx, id, store.RuntimeIdle))
	require.Equal(t, store.StateReady, state())
	_, err = st.SetSessionLifecycle(ctx, id, store.LifecycleTerminated)
	require.NoError(t, err)
	require.Equal(t, store.StateTerminated, state())
}

func TestListSessionFactsByUserPagesByActivity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	ids := []string{f.session.ID}
	for range 4 {
		s, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	// The oldest Session's response ends: it moves to the top.
	_, _, err := st.StartResponse(ctx, store.ResponseStart{SessionID: ids[0], ResponseID: "r", Origin: store.OriginEngine, StartedSeq: 1})
	require.NoError(t, err)
	_, err = st.EndResponse(ctx, store.ResponseEnd{SessionID: ids[0], ResponseID: "r", Outcome: store.OutcomeCompleted, EndedSeq: 1})
	require.NoError(t, err)
	_, err = st.ArchiveSession(ctx, ids[1])
	require.NoError(t, err)

	var seen []string
	var after *store.SessionListCursor
	for {
		page, err := st.ListSessionFactsByUser(ctx, store.SessionListQuery{UserID: f.user.ID, After: after, Limit: 2})
		require.NoError(t, err)
		for _, s := range page {
			seen = append(seen, s.ID)
		}
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &store.SessionListCursor{LastActivityAt: last.LastActivityAt, ID: last.ID}
	}
	require.Len(t, seen, 4, "archived Sessions leave the list")
	require.Equal(t, ids[0], seen[0])
	require.NotContains(t, seen, ids[1])

	archived, err := st.ListSessionFactsByUser(ctx, store.SessionListQuery{UserID: f.user.ID, Archived: true, Limit: 10})
	require.NoError(t, err)
	require.Len(t, archived, 1)
	require.Equal(t, ids[1], archived[0].ID)
	paged, err := st.ListSessionFactsByUser(ctx, store.SessionListQuery{UserID: f.user.ID, Offset: 3, Limit: 10})
	require.NoError(t, err)
	require.Len(t, paged, 1, "page-number paging skips the first three")
	require.Equal(t, seen[3], paged[0].ID)
}

// TestReplaceSessionPermissionModeIsACompareAndSet replaces a refused mode only while
// it is still the stored one, so a mode chosen in between is kept.
func TestReplaceSessionPermissionModeIsACompareAndSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st, id := f.ctx, f.st, f.session.ID
	_, err := st.SetSessionPermissionMode(ctx, id, "bypassPermissions")
	require.NoError(t, err)
	replaced, err := st.ReplaceSessionPermissionMode(ctx, id, "plan", ptr("default"))
	require.NoError(t, err)
	require.False(t, replaced, "the stored mode is not the refused one")
	replaced, err = st.ReplaceSessionPermissionMode(ctx, id, "bypassPermissions", ptr("default"))
	require.NoError(t, err)
	require.True(t, replaced)
	s, err := st.GetSessionByID(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "default", *s.PermissionMode)
	replaced, err = st.ReplaceSessionPermissionMode(ctx, id, "default", nil)
	require.NoError(t, err)
	require.True(t, replaced)
	s, err = st.GetSessionByID(ctx, id)
	require.NoError(t, err)
	require.Nil(t, s.PermissionMode, "a mode nobody knows is stored as none")
}
