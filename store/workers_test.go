package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestClaimDeadWorkersHandsEachDeadWorkersActivitiesOut: a worker silent longer than
// the silence is claimed once, with the activity attempts it recorded and has not
// forgotten; an attempt that ended, or whose activity's later attempt runs on another
// worker, is not one of them, and a live worker is not claimed.
func TestClaimDeadWorkersHandsEachDeadWorkersActivitiesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const dead, live, shared = "astrabox/host/dead", "astrabox/host/live", "astrabox"
	deadBeat, liveBeat := f.st.NewWorkerBeat(dead), f.st.NewWorkerBeat(live)
	t.Cleanup(func() { _ = deadBeat.Close(); _ = liveBeat.Close() })
	require.NoError(t, deadBeat.Mark(f.ctx))
	require.NoError(t, liveBeat.Mark(f.ctx))
	require.NoError(t, liveBeat.Mark(f.ctx), "a second beat updates the row")

	run := func(worker, queue, workflow, activityID, activityType string, attempt int32) store.WorkerActivity {
		a := store.WorkerActivity{
			HostTaskQueue: worker, TaskQueue: queue, WorkflowID: "session/" + workflow, RunID: "run-" + workflow,
			ActivityID: activityID, ActivityType: activityType, Attempt: attempt,
		}
		require.NoError(t, f.st.RecordWorkerActivity(f.ctx, a))
		return a
	}
	relay := run(dead, dead, "a", "12", "Relay", 1)
	prepare := run(dead, shared, "b", "5", "PrepareRuntime", 2)
	run(live, live, "c", "7", "Relay", 1)
	ended := run(dead, dead, "d", "9", "Deliver", 1)
	require.NoError(t, f.st.ForgetWorkerActivity(f.ctx, ended))
	run(dead, shared, "e", "3", "PrepareRuntime", 1)
	retried := run(live, shared, "e", "3", "PrepareRuntime", 2) // its retry runs elsewhere
	require.NoError(t, f.st.ForgetWorkerActivity(f.ctx, store.WorkerActivity{
		HostTaskQueue: dead, WorkflowID: "session/e", RunID: "run-e", ActivityID: "3", Attempt: 1,
	}), "the dead attempt's own end leaves the retry's record")

	claimed, err := f.st.ClaimDeadWorkers(f.ctx, settled(time.Hour, time.Hour))
	require.NoError(t, err)
	assert.Empty(t, claimed, "no worker has been silent for an hour")

	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '1 minute' WHERE host_task_queue = ?`, dead))
	var wg sync.WaitGroup
	results := make([][]store.DeadWorker, 4)
	for i := range results {
		wg.Go(func() {
			var err error
			results[i], err = f.st.ClaimDeadWorkers(f.ctx, settled(30*time.Second, 30*time.Second))
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
	assert.Equal(t, []store.WorkerActivity{relay, prepare}, got[0].Activities)
	assert.True(t, got[0].Activities[0].OnHostQueue())
	assert.False(t, got[0].Activities[1].OnHostQueue())

	var onDead int
	require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT count(*) FROM worker_activities WHERE host_task_queue = $1`, dead, &onDead))
	assert.Zero(t, onDead, "the claim took the dead worker's records")
	var onLive string
	require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT string_agg(workflow_id || '/' || attempt, ',' ORDER BY workflow_id) FROM worker_activities WHERE host_task_queue = $1`, live, &onLive))
	assert.Equal(t, "session/c/1,session/e/"+fmt.Sprint(retried.Attempt), onLive, "the live worker's records stay")

	require.NoError(t, deadBeat.Mark(f.ctx), "a worker that was only slow marks itself alive again")
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, settled(30*time.Second, 30*time.Second))
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
	endBeatServerProcess(t, f, gone)
	endBeatServerProcess(t, f, back)
	require.Error(t, beats[back].Mark(f.ctx), "the beat's connection is gone")
	require.NoError(t, beats[back].Mark(f.ctx), "the next beat connects again")
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '5 seconds'`))

	claimed, err := f.st.ClaimDeadWorkers(f.ctx, settled(time.Minute, 10*time.Second))
	require.NoError(t, err)
	assert.Empty(t, claimed, "within the grace")
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, settled(time.Minute, 2*time.Second))
	require.NoError(t, err)
	require.Len(t, claimed, 1, "only the worker whose connection is gone, after the grace")
	assert.Equal(t, gone, claimed[0].HostTaskQueue)
	assert.Empty(t, claimed[0].Activities)
}

// settled is a claim by a worker whose beats went through for the settling time.
func settled(silence, grace time.Duration) store.DeadWorkerClaim {
	return store.DeadWorkerClaim{Claimer: "astrabox/host/claimer", Silence: silence, Grace: grace, Settled: true}
}

// TestAWorkerThatJustStartedClaimsOnlyWorkersWhoseConnectionEndedWhileItsOwnWasUp: a
// claimer that has not beaten for the settling time yet (it just started, or
// PostgreSQL just came back) takes no worker for dead by its silence, and takes one
// whose beat's connection is gone only if that worker beat while the claimer's own
// connection was up: its connection then ended alone. A worker whose last beat came
// before the claimer's connection began may only have lost its connection to the same
// outage, and is left to the settled claim.
func TestAWorkerThatJustStartedClaimsOnlyWorkersWhoseConnectionEndedWhileItsOwnWasUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const claimer, crashed, outage, slow = "astrabox/host/claimer", "astrabox/host/crashed", "astrabox/host/outage", "astrabox/host/slow"
	beats := map[string]*store.WorkerBeat{}
	for _, q := range []string{outage, claimer, crashed, slow} {
		beats[q] = f.st.NewWorkerBeat(q)
		t.Cleanup(func() { _ = beats[q].Close() })
		require.NoError(t, beats[q].Mark(f.ctx))
	}
	endBeatServerProcess(t, f, crashed)
	endBeatServerProcess(t, f, outage)
	// The crashed worker beat after the claimer connected (it marked itself alive
	// after the claimer did); the outage worker's last beat came before that. The slow
	// worker, whose connection lives, is past the silence.
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers w SET seen_at = me.backend_start - interval '1 second'
		FROM workers me WHERE me.host_task_queue = ? AND w.host_task_queue = ?`, claimer, outage))
	require.NoError(t, store.ExecForTest(f.ctx, f.st, `UPDATE workers SET seen_at = now() - interval '2 minutes' WHERE host_task_queue = ?`, slow))

	unsettled := store.DeadWorkerClaim{Claimer: claimer, Silence: time.Minute}
	claimed, err := f.st.ClaimDeadWorkers(f.ctx, unsettled)
	require.NoError(t, err)
	require.Len(t, claimed, 1, "only the worker whose connection ended while the claimer's was up")
	assert.Equal(t, crashed, claimed[0].HostTaskQueue)

	endBeatServerProcess(t, f, claimer)
	// The crashed worker beats again, after the claimer connected, and its connection
	// ends: claimable unsettled by a claimer whose connection is up, as above.
	require.NoError(t, beats[crashed].Close())
	require.NoError(t, beats[crashed].Mark(f.ctx))
	endBeatServerProcess(t, f, crashed)
	claimed, err = f.st.ClaimDeadWorkers(f.ctx, unsettled)
	require.NoError(t, err)
	assert.Empty(t, claimed, "a claimer whose own beat connection is gone claims nothing unsettled")

	claimed, err = f.st.ClaimDeadWorkers(f.ctx, settled(time.Minute, 0))
	require.NoError(t, err)
	var got []string
	for _, d := range claimed {
		got = append(got, d.HostTaskQueue)
	}
	assert.ElementsMatch(t, []string{outage, slow, crashed}, got, "settled, by their closed connections and by the silence; never the claimer")
}

// endBeatServerProcess ends the server process of the connection the worker of host
// task queue q last beat through, as PostgreSQL does when the worker's process dies.
func endBeatServerProcess(t *testing.T, f *fixture, q string) {
	t.Helper()
	var pid int
	require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT backend_pid FROM workers WHERE host_task_queue = $1`, q, &pid))
	var ended bool
	require.NoError(t, store.QueryRowForTest(f.ctx, f.st, `SELECT pg_terminate_backend($1, 10000)`, pid, &ended))
	require.True(t, ended, "the beat's server process of %s ended", q)
}
