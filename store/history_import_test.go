package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestImportHistoryIsRepeatableAndOrdered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	m1 := store.ImportedMessage{SourceID: "m-1", Role: "user", CreatedAt: t0, Blocks: json.RawMessage(`[{"type":"text","text":"Summarize the incident."}]`)}
	m2 := store.ImportedMessage{SourceID: "m-2", Role: "assistant", CreatedAt: t0.Add(20 * time.Second), Completion: ptr("unknown"),
		ParentSourceID: ptr("m-1"), Blocks: json.RawMessage(`[{"type":"text","text":"The outage began when"}]`)}
	m3 := store.ImportedMessage{SourceID: "m-3", Role: "user", CreatedAt: t0.Add(time.Minute), Blocks: json.RawMessage(`[{"type":"text","text":"Go on."}]`)}

	n, err := st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, m2})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, m2})
	require.NoError(t, err)
	require.Zero(t, n, "running the same import again changes nothing")
	n, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, m2, m3})
	require.NoError(t, err)
	require.Equal(t, 1, n, "continuing sends the imported ones first")

	changed := m2
	changed.Blocks = json.RawMessage(`[{"type":"text","text":"Something else"}]`)
	_, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, changed})
	require.ErrorIs(t, err, store.ErrHistoryImportConflict)
	newFirst := store.ImportedMessage{SourceID: "m-0", Role: "user", CreatedAt: t0, Blocks: json.RawMessage(`[]`)}
	_, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{newFirst, m1, m2, m3})
	require.ErrorIs(t, err, store.ErrHistoryImportConflict, "a new message before imported ones")
	_, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, m2, m3, m1})
	require.ErrorIs(t, err, store.ErrHistoryImportConflict, "a used source_id at another position")
	count, err := st.CountImportedMessages(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), count, "refused imports wrote nothing")

	_, _, err = st.InsertInput(ctx, store.NewInput{SessionID: f.session.ID, Content: "first message of its own"})
	require.NoError(t, err)
	_, err = st.ImportHistory(ctx, f.session.ID, []store.ImportedMessage{m1, m2, m3})
	require.ErrorIs(t, err, store.ErrHistoryImportAfterConversation)

	_, err = st.ImportHistory(ctx, f.session.ID, nil)
	require.ErrorIs(t, err, store.ErrHistoryImportAfterConversation)
}

func TestImportedReplyNeedsCompletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.st.ImportHistory(f.ctx, f.session.ID, []store.ImportedMessage{{SourceID: "r", Role: "assistant", CreatedAt: time.Now(), Blocks: json.RawMessage(`[]`)}})
	require.Error(t, err)
}
