package hostwatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/worker/hostwatch"
)

const hostQueue = "q/host/recorder"

// TestTheRecorderRecordsEveryAttemptWhileItRuns: while they run, a worker's activity
// attempts, taken from its host task queue or from the shared one, are recorded under
// the worker, so that a dead worker's claim hands them out, and every record is gone
// once its attempt ended.
func TestTheRecorderRecordsEveryAttemptWhileItRuns(t *testing.T) {
	t.Parallel()
	st, _ := testutil.NewDB(t)
	rec, err := hostwatch.NewRecorder(st, hostQueue, zap.NewNop())
	require.NoError(t, err)

	probe := func(ctx context.Context) ([]store.WorkerActivity, error) { return claimAsDead(ctx, st) }
	probeWorkflow := func(ctx workflow.Context) ([][]store.WorkerActivity, error) {
		short := workflow.ActivityOptions{StartToCloseTimeout: time.Minute}
		host := short
		host.TaskQueue = hostQueue
		var seen [][]store.WorkerActivity
		for _, opts := range []workflow.ActivityOptions{host, short} {
			var got []store.WorkerActivity
			if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), "Probe").Get(ctx, &got); err != nil {
				return nil, err
			}
			seen = append(seen, got)
		}
		return seen, nil
	}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	env.RegisterActivityWithOptions(probe, activity.RegisterOptions{Name: "Probe"})
	env.RegisterWorkflowWithOptions(probeWorkflow, workflow.RegisterOptions{Name: "ProbeWorkflow"})
	env.ExecuteWorkflow("ProbeWorkflow")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var seen [][]store.WorkerActivity
	require.NoError(t, env.GetWorkflowResult(&seen))
	require.Len(t, seen, 2)

	for i, name := range []string{"the host activity", "the shared activity"} {
		require.Len(t, seen[i], 1, name)
		a := seen[i][0]
		assert.Equal(t, "Probe", a.ActivityType, name)
		assert.Equal(t, hostQueue, a.HostTaskQueue, name)
		assert.NotEmpty(t, a.WorkflowID, name)
		assert.NotEmpty(t, a.RunID, name)
		assert.NotEmpty(t, a.ActivityID, name)
		assert.Equal(t, int32(1), a.Attempt, name)
	}
	assert.True(t, seen[0][0].OnHostQueue(), "taken from the host task queue")
	assert.False(t, seen[1][0].OnHostQueue(), "taken from the shared queue")

	left, err := claimAsDead(testutil.Context(t), st)
	require.NoError(t, err)
	assert.Empty(t, left, "every record is gone with its attempt")
}

// claimAsDead claims the recorder's worker, as if dead, and returns the attempts it
// was running.
func claimAsDead(ctx context.Context, st *store.Store) ([]store.WorkerActivity, error) {
	beat := st.NewWorkerBeat(hostQueue)
	defer beat.Close()
	if err := beat.Mark(ctx); err != nil {
		return nil, err
	}
	dead, err := st.ClaimDeadWorkers(ctx, store.DeadWorkerClaim{Claimer: "astrabox/host/watcher", Settled: true})
	if err != nil || len(dead) == 0 {
		return nil, err
	}
	return dead[0].Activities, nil
}

// TestAHostActivityThisWorkersStopCutShortFailsForGood: a host activity that fails
// while its worker stops would be retried on that worker's queue, which no one polls
// any more, so it fails for good with ErrTypeWorkerLost and the workflow reconnects;
// an activity of the shared queue keeps its own error, which Temporal retries on
// another worker, and a host activity that fails while its worker runs keeps its own.
// An attempt that ended while its worker stops keeps its record, for the others'
// watch, since the SDK may not report its end any more.
func TestAHostActivityThisWorkersStopCutShortFailsForGood(t *testing.T) {
	t.Parallel()
	st, _ := testutil.NewDB(t)
	rec, err := hostwatch.NewRecorder(st, hostQueue, zap.NewNop())
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		queue    string
		stopping bool
		wantType string
	}{
		{"host activity, worker stopping", hostQueue, true, activities.ErrTypeWorkerLost},
		{"shared activity, worker stopping", "", true, "Cut"},
		{"host activity, worker running", hostQueue, false, "Cut"},
	} {
		// Subtests share the database, so they run one after another.
		t.Run(tc.name, func(t *testing.T) {
			cut := func(context.Context) error { return temporal.NewApplicationError("cut short", "Cut") }
			wf := func(ctx workflow.Context) error {
				opts := workflow.ActivityOptions{StartToCloseTimeout: time.Minute, TaskQueue: tc.queue,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}}
				return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), "Cut").Get(ctx, nil)
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
			stop := make(chan struct{})
			if tc.stopping {
				close(stop)
			}
			env.SetWorkerStopChannel(stop)
			env.RegisterActivityWithOptions(cut, activity.RegisterOptions{Name: "Cut"})
			env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "CutWorkflow"})
			env.ExecuteWorkflow("CutWorkflow")
			require.True(t, env.IsWorkflowCompleted())
			var app *temporal.ApplicationError
			require.ErrorAs(t, env.GetWorkflowError(), &app)
			assert.Equal(t, tc.wantType, app.Type())
			assert.Equal(t, tc.wantType == activities.ErrTypeWorkerLost, app.NonRetryable())
			kept, err := claimAsDead(testutil.Context(t), st)
			require.NoError(t, err)
			if tc.stopping {
				require.Len(t, kept, 1, "the record stays for the others' watch")
				assert.Equal(t, "Cut", kept[0].ActivityType)
			} else {
				assert.Empty(t, kept)
			}
		})
	}
}

func TestNewRecorderRefusesMissingParts(t *testing.T) {
	t.Parallel()
	_, err := hostwatch.NewRecorder(nil, hostQueue, zap.NewNop())
	require.Error(t, err)
	_, err = hostwatch.NewRecorder(&store.Store{}, "", zap.NewNop())
	require.Error(t, err)
}
