package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

// Activity options. The reasons are in docs/orchestration.md; in short:
//
//   - Database-only activities on the shared queue retry quickly and often: a
//     database blip must not terminate a Session.
//   - PrepareRuntime may create a box (seconds), so it has minutes, and a few
//     attempts before the runtime is declared offline (TERMINATED). It and
//     ActivateRuntime heartbeat while they run: a worker that died in one is
//     noticed within SetupHeartbeatTimeout, not at the end of its minutes.
//   - Host-queue activities have a ScheduleToStart timeout: when the worker holding
//     the connection died nobody polls its queue, and the timeout is how the
//     workflow learns it must reconnect through another worker.
//   - Relay is one attempt with a heartbeat timeout; the workflow itself decides
//     between reconnecting and replacing the box when it ends. It heartbeats seldom,
//     so the workflow stops it through StopRelay on its host queue, which ends it at
//     once, as well as by cancelling it.
var (
	sharedRetry = &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
		MaximumAttempts:    10,
	}
	sharedOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         sharedRetry,
	}
	prepareOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    SetupHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    5,
		},
	}
	hostRetry = &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    3,
	}
	// TaskTimeout is the Session workflow's workflow task timeout, half the SDK's 10 s:
	// a task a worker had started when it died goes to another worker only when it runs
	// out, and meanwhile the Session's stream stalls (a Relay failed for the dead worker
	// waits for it). The workflow's tasks take milliseconds; a replay of a whole history,
	// which continue-as-new bounds, well under a second on two busy cores.
	TaskTimeout = 5 * time.Second
	// HostScheduleToStart is how long a host-queue activity may wait for its worker.
	HostScheduleToStart = 30 * time.Second
	// RelayHeartbeatTimeout is how long a Relay may go without a heartbeat: three of
	// its heartbeats. A dead worker's Relays are failed sooner by the host watch; this
	// is for a Relay whose loop is stuck on a live worker.
	RelayHeartbeatTimeout = 3 * activities.DefaultRelayHeartbeatEvery
	// SetupHeartbeatTimeout is how long PrepareRuntime and ActivateRuntime, which
	// heartbeat while they run, may go without one: a worker that died running them
	// is noticed then, not at the end of their start-to-close timeouts.
	SetupHeartbeatTimeout = 20 * time.Second
)

func withShared(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, sharedOptions)
}

func withPrepare(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, prepareOptions)
}

// withHost routes an activity to the host task queue of the worker holding the
// Session's runtime connection.
func withHost(ctx workflow.Context, queue string, startToClose time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: HostScheduleToStart,
		StartToCloseTimeout:    startToClose,
		RetryPolicy:            hostRetry,
	})
}

// withHeartbeat adds the setup activities' heartbeat timeout to ctx's options.
func withHeartbeat(ctx workflow.Context) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	opts.HeartbeatTimeout = SetupHeartbeatTimeout
	return workflow.WithActivityOptions(ctx, opts)
}

// withRelay is the long-running Relay on the host queue: one attempt, heartbeats,
// and the workflow waits for its clean-up when it cancels it.
func withRelay(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: HostScheduleToStart,
		StartToCloseTimeout:    365 * 24 * time.Hour,
		HeartbeatTimeout:       RelayHeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// withStopRelay is StopRelay on the host queue of the Relay it ends: one attempt,
// since Temporal's cancellation still reaches the Relay when it fails.
func withStopRelay(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: HostScheduleToStart,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// summarized gives the activities scheduled with ctx a one-line summary, which the
// Temporal UI shows for each activity (user metadata).
func summarized(ctx workflow.Context, summary string) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	opts.Summary = summary
	return workflow.WithActivityOptions(ctx, opts)
}

// refusalReason is an application error's own message, without the SDK's wrapping.
func refusalReason(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// errorType names a failure the workflow switches on: an application error's type,
// "Timeout" for a timeout (a host worker that stopped polling or heartbeating), or "".
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "Timeout"
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "Canceled"
	}
	return ""
}
