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
// reconciliation of a lost box) or ran out before the worker's last beat (a Relay
// that had ended) is not one of them, and a live worker is not claimed.
func TestClaimDeadWorkersHandsEachDeadWorkersRelaysOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const dead, live = "astrabox/host/dead", "astrabox/host/live"
	deadBeat, liveBeat := f.st.NewWorkerBeat(dead), f.st.NewWorkerBeat(live)
	t.Cleanup(func() { _ = deadBeat.Close(); _ = liveBeat.Close() })
	require.NoError(t, deadBeat.Mark(f.ctx))
	require.NoError(t, liveBeat.Mark(f.ctx))
	require.NoError(t, liveBeat.Mark(f.ctx), "a second beat updates the row")

	relayOn := func(sessionID, queue, activityID string) store.ReaderLease {
		l, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{
			SessionID: sessionID, Holder: queue + "/" + activityID + "/1", TTL: time.Minute, Steal: true,
			Relay: &store.RelayActivity{HostTaskQueue: queue, WorkflowID: "session/" + sessionID, RunID: "run-" + sessionID, ActivityID: activityID},
		})
		require.NoError(t, err)
		return l
	}
	sessions, _, _ := groupSessions(t, f, 5)
	orphaned := relayOn(sessions[0], dead, "12")
	relayOn(sessions[1], live, "7")
	relayOn(sessions[2], dead, "9")
	relayOn(sessions[2], live, "15") // the Session's newer Relay runs elsewhere
	relayOn(sessions[3], dead, "4")
	_, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: sessions[3], Holder: "reconcile", TTL: time.Minute, Steal: true})
	require.NoError(t, err)
	relayOn(sessions[4], dead, "3") // a Relay that ended: its lease ran out long ago
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE reader_leases SET expires_at = now() - interval '1 hour' WHERE session_id = ?`, sessions[4]))

	claimed, err := f.st.ClaimDeadWorkers(f.ctx, time.Hour, time.Hour)
	require.NoError(t, err)
	assert.Empty(t, claimed, "no worker has been silent for an hour")

	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '1 minute' WHERE host_task_queue = ?`, dead))
	var wg sync.WaitGroup
	results := make([][]store.DeadWorker, 4)
	for i := range results {
		wg.Go(func() {
			var err error
			results[i], err = f.st.ClaimDeadWorkers(f.ctx, 30*time.Second, 30*time.Second)
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

	require.NoError(t, deadBeat.Mark(f.ctx), "a worker that was only slow marks itself alive again")
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, 30*time.Second, 30*time.Second)
	require.NoError(t, err)
	assert.Empty(t, claimed)
}

// TestAWorkerWhoseBeatsConnectionIsGoneIsDeadAfterTheGrace: a worker process that
// died closed its beat's connection, and is claimed once the grace has passed,
// long before the silence; a worker as silent that keeps its connection (a slow one)
// is not, and neither is one whose connection broke but that marked itself alive
// again on a new one.
func TestAWorkerWhoseBeatsConnectionIsGoneIsDeadAfterTheGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const gone, slow, back = "astrabox/host/gone", "astrabox/host/slow", "astrabox/host/back"
	beats := map[string]*store.WorkerBeat{}
	for _, q := range []string{gone, slow, back} {
		beats[q] = f.st.NewWorkerBeat(q)
		t.Cleanup(func() { _ = beats[q].Close() })
		require.NoError(t, beats[q].Mark(f.ctx))
	}
	closeServerProcess := func(q string) {
		var pid int
		require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT backend_pid FROM workers WHERE host_task_queue = $1`, q, &pid))
		var ended bool
		require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT pg_terminate_backend($1, 10000)`, pid, &ended))
		require.True(t, ended, "the beat's server process of %s ended", q)
	}
	closeServerProcess(gone)
	closeServerProcess(back)
	require.Error(t, beats[back].Mark(f.ctx), "the beat's connection is gone")
	require.NoError(t, beats[back].Mark(f.ctx), "the next beat connects again")
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '5 seconds'`))

	claimed, err := f.st.ClaimDeadWorkers(f.ctx, time.Minute, 10*time.Second)
	require.NoError(t, err)
	assert.Empty(t, claimed, "within the grace")
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, time.Minute, 2*time.Second)
	require.NoError(t, err)
	require.Len(t, claimed, 1, "only the worker whose connection is gone, after the grace")
	assert.Equal(t, gone, claimed[0].HostTaskQueue)
	assert.Empty(t, claimed[0].Relays)
}
