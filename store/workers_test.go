package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestClaimDeadWorkersHandsEachDeadWorkersRelaysOut: a worker silent longer than
// the silence is claimed once, with the Relays that still hold their Sessions'
// leases on it; a Relay whose lease moved on (a newer Relay elsewhere, or the
// reconciliation of a lost box) is not one of them, and a live worker is not claimed.
func TestClaimDeadWorkersHandsEachDeadWorkersRelaysOut(t *testing.T) {
	f := newFixture(t)
	const dead, live = "astrabox/host/dead", "astrabox/host/live"
	require.NoError(t, f.st.MarkWorkerAlive(f.ctx, dead))
	require.NoError(t, f.st.MarkWorkerAlive(f.ctx, live))
	require.NoError(t, f.st.MarkWorkerAlive(f.ctx, live), "a second beat updates the row")

	relayOn := func(sessionID, queue, activityID string) store.ReaderLease {
		l, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{
			SessionID: sessionID, Holder: queue + "/" + activityID + "/1", TTL: time.Minute, Steal: true,
			Relay: &store.RelayActivity{HostTaskQueue: queue, WorkflowID: "session/" + sessionID, RunID: "run-" + sessionID, ActivityID: activityID},
		})
		require.NoError(t, err)
		return l
	}
	sessions, _, _ := groupSessions(t, f, 4)
	orphaned := relayOn(sessions[0], dead, "12")
	relayOn(sessions[1], live, "7")
	relayOn(sessions[2], dead, "9")
	relayOn(sessions[2], live, "15") // the Session's newer Relay runs elsewhere
	relayOn(sessions[3], dead, "4")
	_, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: sessions[3], Holder: "reconcile", TTL: time.Minute, Steal: true})
	require.NoError(t, err)

	claimed, err := f.st.ClaimDeadWorkers(f.ctx, time.Hour)
	require.NoError(t, err)
	assert.Empty(t, claimed, "no worker has been silent for an hour")

	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '1 minute' WHERE host_task_queue = ?`, dead))
	var wg sync.WaitGroup
	results := make([][]store.DeadWorker, 4)
	for i := range results {
		wg.Go(func() {
			var err error
			results[i], err = f.st.ClaimDeadWorkers(f.ctx, 30*time.Second)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	var got []store.DeadWorker
	for _, r := range results {
		got = append(got, r...)
	}
	require.Len(t, got, 1, "the dead worker is claimed once among claims at once")
	assert.Equal(t, dead, got[0].HostTaskQueue)
	assert.Equal(t, []store.OrphanedRelay{{SessionID: sessions[0], Generation: orphaned.Generation, RelayActivity: store.RelayActivity{
		HostTaskQueue: dead, WorkflowID: "session/" + sessions[0], RunID: "run-" + sessions[0], ActivityID: "12",
	}}}, got[0].Relays)

	require.NoError(t, f.st.MarkWorkerAlive(f.ctx, dead), "a worker that was only slow marks itself alive again")
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, 30*time.Second)
	require.NoError(t, err)
	assert.Empty(t, claimed)
}
