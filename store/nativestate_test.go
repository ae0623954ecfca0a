package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestChildRunsKeepOneRowPerNativeRef(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	parent, err := st.UpsertChildRun(ctx, store.ChildRunReport{SessionID: f.session.ID, NativeRef: "agent-7", Name: "research", Status: "running"})
	require.NoError(t, err)
	require.Equal(t, store.ChildRunID(f.session.ID, "agent-7"), parent.ID)
	require.NotContains(t, parent.ID, "agent-7", "the native reference stays private")

	child, err := st.UpsertChildRun(ctx, store.ChildRunReport{SessionID: f.session.ID, NativeRef: "agent-8", ParentNativeRef: ptr("agent-7"), Status: "running"})
	require.NoError(t, err)
	require.Equal(t, parent.ID, *child.ParentID)

	updated, err := st.UpsertChildRun(ctx, store.ChildRunReport{SessionID: f.session.ID, NativeRef: "agent-7", Status: "completed", Usage: json.RawMessage(`{"tokens":5}`)})
	require.NoError(t, err)
	require.Equal(t, parent.ID, updated.ID)
	require.Equal(t, "completed", updated.Status)
	require.Equal(t, "research", updated.Name, "an empty name keeps the reported one")
	require.Equal(t, "agent-7", *updated.NativeRef, "a report with a native reference keeps it")

	runs, err := st.ListChildRunsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, runs, 2)

	_, err = st.UpsertChildRun(ctx, store.ChildRunReport{SessionID: f.session.ID, NativeRef: "orphan", ParentNativeRef: ptr("unknown"), Status: "running"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestSessionLogMirrorsEntriesInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	entries := []json.RawMessage{json.RawMessage(`{"type":"user","n":1}`), json.RawMessage(`{"type":"assistant","n":2}`)}
	stored, err := st.AppendSessionLogEntries(ctx, f.session.ID, "transcript.jsonl", 0, entries)
	require.NoError(t, err)
	require.Zero(t, stored, "nothing mirrored before")
	// Mirroring again from an overlapping position keeps the stored entries.
	stored, err = st.AppendSessionLogEntries(ctx, f.session.ID, "transcript.jsonl", 1, []json.RawMessage{json.RawMessage(`{"type":"assistant","n":"changed"}`), json.RawMessage(`{"type":"user","n":3}`)})
	require.NoError(t, err)
	require.Equal(t, int64(2), stored)
	got, err := st.ListSessionLogEntries(ctx, f.session.ID, "transcript.jsonl")
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, e := range got {
		require.Equal(t, int64(i+1), e.EntrySeq)
	}
	require.JSONEq(t, `{"type":"assistant","n":2}`, string(got[1].Entry), "an entry stored under its seq is kept")
	require.JSONEq(t, `{"type":"user","n":3}`, string(got[2].Entry))

	// A caller that counts more entries than the mirror holds writes nothing and learns
	// the mirror's count.
	stored, err = st.AppendSessionLogEntries(ctx, f.session.ID, "transcript.jsonl", 5, []json.RawMessage{json.RawMessage(`{"type":"user","n":6}`)})
	require.NoError(t, err)
	require.Equal(t, int64(3), stored)
	got, err = st.ListSessionLogEntries(ctx, f.session.ID, "transcript.jsonl")
	require.NoError(t, err)
	require.Len(t, got, 3, "no entry after a gap")

	stored, err = st.AppendSessionLogEntries(ctx, f.session.ID, "other.jsonl", 0, entries[:1])
	require.NoError(t, err)
	require.Zero(t, stored, "another stream's entries are its own")
	streams, err := st.ListSessionLogStreams(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"other.jsonl", "transcript.jsonl"}, streams)
}

func TestRuntimeStateBlobPredecessorCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	b, err := st.PutRuntimeStateBlob(ctx, "session", f.session.ID, "profile.tar", []byte("v1"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), b.Generation)
	_, err = st.PutRuntimeStateBlob(ctx, "session", f.session.ID, "profile.tar", []byte("again"), 0)
	require.ErrorIs(t, err, store.ErrVersionConflict)

	b2, err := st.PutRuntimeStateBlob(ctx, "session", f.session.ID, "profile.tar", []byte("v2"), 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), b2.Generation)
	_, err = st.PutRuntimeStateBlob(ctx, "session", f.session.ID, "profile.tar", []byte("stale"), 1)
	require.ErrorIs(t, err, store.ErrVersionConflict, "a superseded predecessor is refused")

	got, err := st.GetRuntimeStateBlob(ctx, "session", f.session.ID, "profile.tar")
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), got.Data)
	require.Len(t, got.SHA256, 32)
	_, err = st.PutRuntimeStateBlob(ctx, "galaxy", f.session.ID, "x", []byte("v"), 0)
	require.Error(t, err, "scope is a closed vocabulary")
}

func TestHasConversationContentFromAdmissionsAndTheMirror(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	has := func() bool {
		t.Helper()
		ok, err := st.HasConversationContent(ctx, f.session.ID)
		require.NoError(t, err)
		return ok
	}
	require.False(t, has(), "a new Session's conversation holds nothing")
	in, _, err := st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "hello"})
	require.NoError(t, err)
	_, err = st.MarkInputDelivered(ctx, f.session.ID, in.ID)
	require.NoError(t, err)
	require.False(t, has(), "a held input is not in the conversation until the runtime admits it")
	_, err = st.MarkInputsAdmitted(ctx, f.session.ID, []string{in.ID})
	require.NoError(t, err)
	require.True(t, has(), "an admitted input is")

	other, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	require.NotEqual(t, f.session.ID, other.ID)
	ok, err := st.HasConversationContent(ctx, other.ID)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = st.AppendSessionLogEntries(ctx, other.ID, "session_log:log.jsonl", 0, []json.RawMessage{json.RawMessage(`{"type":"user"}`)})
	require.NoError(t, err)
	ok, err = st.HasConversationContent(ctx, other.ID)
	require.NoError(t, err)
	require.True(t, ok, "a mirrored entry is content")
}
