package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
)

// childBatch is a Relay batch under lease generation gen with the given facts.
func childBatch(f *fixture, gen int64, offset int, ops ...store.RelayOp) store.RelayBatch {
	return store.RelayBatch{SessionID: f.session.ID, LeaseGeneration: gen, Ops: ops, Cursor: relayCursor(offset)}
}

func TestRelayRecordsChildRunsByPublicID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-" + uniq("a"), TTL: time.Minute})
	require.NoError(t, err)
	parentID := engines.ChildRunID(f.session.ID, "native-parent")
	childID := engines.ChildRunID(f.session.ID, "native-child")

	// The child is reported before its parent: it is recorded without one rather
	// than stalling the Relay.
	_, err = st.ApplyRelayBatch(ctx, childBatch(f, lease.Generation, 1,
		store.RelayOp{StartResponse: &store.ResponseStart{ResponseID: "r1", Origin: "input"}},
		part("r1", `{"type":"start","messageId":"r1"}`),
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: childID, ParentID: &parentID, ResponseID: ptr("r1"), Name: "explore the repo",
			AgentType: "Explore", ParentToolCallID: ptr("call-1"), Status: "running", ControlRef: ptr("ctl-1")}},
	))
	require.NoError(t, err)
	child, err := st.GetChildRunByID(ctx, f.session.ID, childID)
	require.NoError(t, err)
	require.Nil(t, child.NativeRef, "the platform never holds the native reference")
	require.Nil(t, child.ParentID)
	require.Equal(t, "r1", *child.ResponseID)
	require.Equal(t, "explore the repo", child.Name)
	require.Equal(t, "Explore", child.AgentType)
	require.Equal(t, "call-1", *child.ParentToolCallID)
	require.Equal(t, "running", child.Status)
	require.Equal(t, "ctl-1", *child.ControlRef)

	// The parent arrives, then the child's last report: it wins for status, usage and
	// control reference (gone: the child can no longer be stopped), keeps the title it
	// leaves out and the response the child started in, and fills in the parent.
	msg, err := engines.SubagentMessageFrame(f.session.ID, "native-child", engines.ChildRunMessage{MessageID: "m1", Role: "assistant", Parts: json.RawMessage(`[{"type":"text","text":"found it"}]`)})
	require.NoError(t, err)
	msgJSON, err := json.Marshal(msg)
	require.NoError(t, err)
	_, err = st.ApplyRelayBatch(ctx, childBatch(f, lease.Generation, 2,
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: parentID, Name: "lead", Status: "running"}},
		store.RelayOp{Part: &store.NewPart{Frame: msgJSON}},
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: childID, ParentID: &parentID, Status: "stopped", Usage: json.RawMessage(`{"output_tokens":7}`)}},
	))
	require.NoError(t, err)
	child, err = st.GetChildRunByID(ctx, f.session.ID, childID)
	require.NoError(t, err)
	require.Equal(t, "stopped", child.Status)
	require.Nil(t, child.ControlRef)
	require.JSONEq(t, `{"output_tokens":7}`, string(child.Usage))
	require.Equal(t, "explore the repo", child.Name)
	require.Equal(t, "Explore", child.AgentType)
	require.Equal(t, "r1", *child.ResponseID)
	require.Equal(t, parentID, *child.ParentID)
	require.True(t, child.UpdatedAt.After(child.CreatedAt), "a later report bumps updated_at")

	runs, err := st.ListChildRunsBySession(ctx, f.session.ID)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	msgs, err := st.ListChildRunMessageParts(ctx, f.session.ID, childID)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the child's messages are read from the output log")
	require.JSONEq(t, string(msgJSON), string(msgs[0].Frame))

	// A superseded Relay writes no child row, new or updated.
	fresh, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-" + uniq("b"), TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	require.Greater(t, fresh.Generation, lease.Generation)
	zombieChild := engines.ChildRunID(f.session.ID, "native-zombie")
	_, err = st.ApplyRelayBatch(ctx, childBatch(f, lease.Generation, 3,
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: childID, Status: "running", ControlRef: ptr("ctl-zombie")}},
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: zombieChild, Status: "running"}},
	))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	child, err = st.GetChildRunByID(ctx, f.session.ID, childID)
	require.NoError(t, err)
	require.Equal(t, "stopped", child.Status)
	require.Nil(t, child.ControlRef)
	_, err = st.GetChildRunByID(ctx, f.session.ID, zombieChild)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestChildRunReportCannotTouchAnotherSessionsRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st
	other, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	theirs, err := st.UpsertChildRun(ctx, store.ChildRunReport{SessionID: other.ID, NativeRef: "native-1", Status: "running"})
	require.NoError(t, err)
	lease, err := st.AcquireReaderLease(ctx, store.LeaseRequest{SessionID: f.session.ID, Holder: "relay-" + uniq("a"), TTL: time.Minute})
	require.NoError(t, err)

	_, err = st.ApplyRelayBatch(ctx, childBatch(f, lease.Generation, 1,
		store.RelayOp{ChildRun: &store.ChildRunReport{ID: theirs.ID, Status: "stopped"}},
	))
	require.NoError(t, err)
	got, err := st.GetChildRunByID(ctx, other.ID, theirs.ID)
	require.NoError(t, err)
	require.Equal(t, "running", got.Status)
	_, err = st.GetChildRunByID(ctx, f.session.ID, theirs.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}
