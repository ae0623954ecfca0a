package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/worker"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	pinnedWorkflow      = "VersionedPinned"
	autoUpgradeWorkflow = "VersionedAutoUpgrade"
	proceedSignal       = "proceed"
)

// build registers, under the two names, a workflow that waits for proceedSignal and
// returns the build that ran its last workflow task.
func build(id string) worker.Registrar {
	wf := func(ctx workflow.Context) (string, error) {
		workflow.GetSignalChannel(ctx, proceedSignal).Receive(ctx, nil)
		return id, nil
	}
	return func(r sdkworker.Registry) {
		r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: pinnedWorkflow, VersioningBehavior: workflow.VersioningBehaviorPinned})
		r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: autoUpgradeWorkflow})
	}
}

// hostActivity gives the (unversioned) host worker something to register.
func hostActivity(r sdkworker.Registry) {
	r.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "Noop"})
}

// TestRollingUpgradeKeepsPinnedWorkflowsOnTheirBuild runs two builds of one worker
// deployment as a rolling upgrade does: workflows started on build 1 are running when
// build 2 becomes current; a pinned one finishes on build 1, an auto-upgrade one (the
// default, AstraBox's Session workflows) moves to build 2 at its next workflow task.
func TestRollingUpgradeKeepsPinnedWorkflowsOnTheirBuild(t *testing.T) {
	t.Parallel()
	ctx := testutil.ContextWithTimeout(t, 3*time.Minute)
	dev := testutil.TemporalDevServer(t)
	c := dev.Client()
	queue, deployment := "versioning-"+uuid.NewString(), "astrabox-test-"+uuid.NewString()[:8]

	start := func(buildID string) (madeCurrent bool) {
		w, err := worker.New(c, worker.Options{
			SharedTaskQueue: queue,
			Shared:          []worker.Registrar{build(buildID)},
			Host:            []worker.Registrar{hostActivity},
			Logger:          testutil.Logger(t).Named(buildID),
			Version:         &worker.Version{DeploymentName: deployment, BuildID: buildID, Behavior: workflow.VersioningBehaviorAutoUpgrade},
		})
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-done)
		})
		// As the worker process does at start: the first version of a deployment makes
		// itself current, a later one leaves the current version alone.
		madeCurrent, err = temporalconn.EnsureCurrentVersion(ctx, c, deployment, buildID)
		require.NoError(t, err)
		return madeCurrent
	}

	require.True(t, start("build-1"), "a new deployment's first version becomes current")
	runs := map[string]client.WorkflowRun{}
	for _, name := range []string{pinnedWorkflow, autoUpgradeWorkflow} {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: name + "-" + uuid.NewString(), TaskQueue: queue}, name)
		require.NoError(t, err)
		runs[name] = run
		eventually(ctx, t, name+" to run on build-1", func() bool {
			desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
			require.NoError(t, err)
			return desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId() == "build-1"
		})
	}

	require.False(t, start("build-2"), "a running deployment keeps its current version")
	desc, err := c.WorkerDeploymentClient().GetHandle(deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	require.NoError(t, err)
	require.Equal(t, "build-1", desc.Info.RoutingConfig.CurrentVersion.BuildID)
	// The operator promotes the new build (`astrabox temporal set-current-version`).
	eventually(ctx, t, "build-2 to become current", func() bool {
		return temporalconn.SetCurrentVersion(ctx, c, deployment, "build-2") == nil
	})
	for name, run := range runs {
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), "", proceedSignal, nil))
		var ranOn string
		require.NoError(t, run.Get(ctx, &ranOn), name)
		want := map[string]string{pinnedWorkflow: "build-1", autoUpgradeWorkflow: "build-2"}[name]
		require.Equal(t, want, ranOn, name)
	}
}

// eventually polls cond until it holds; the server's deployment state has no event a
// test could wait on.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
