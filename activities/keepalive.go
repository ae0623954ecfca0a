package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// keepAlive heartbeats a long activity (preparing a box, activating a runtime) until
// the returned stop is called. With a heartbeat timeout on the activity, Temporal then
// notices a worker that died running it within that timeout and retries the activity
// elsewhere, instead of waiting out its start-to-close timeout (minutes) while the
// Session waits. A worker that is stopping stops vouching for the activity (it is
// abandoning it unless it finishes within the timeout). Outside an activity it does
// nothing.
func (a *Activities) keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	stopping := activity.GetWorkerStopChannel(ctx)
	go func() {
		defer close(done)
		tick := time.NewTicker(a.set.HeartbeatEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-stopping:
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
