package hostwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/store"
)

// recordTimeout bounds each of the record's statements: the record only shortens
// the wait after a death, so an activity does not wait long on a slow database for it.
const recordTimeout = 2 * time.Second

// Records keeps the record of the activity attempts a worker runs (store.Store).
type Records interface {
	RecordWorkerActivity(ctx context.Context, a store.WorkerActivity) error
	ForgetWorkerActivity(ctx context.Context, a store.WorkerActivity) error
}

var _ Records = (*store.Store)(nil)

// Recorder is the worker interceptor that records every activity attempt of this
// worker while it runs, so that the others' watch can fail it should this worker die:
// Temporal would otherwise learn of the death only at the attempt's timeouts (a
// Relay's or an activation's heartbeat timeout; a short activity's start-to-close
// timeout, after which a host activity's retry also waits out its schedule-to-start on
// this worker's queue). No activity runs for every turn of a conversation, so the two
// statements an attempt costs are spent on bring-ups, releases and people's actions.
//
// It also hands back the host activities this worker's stop cut short: their retry
// would wait on this worker's queue, which no one polls once it stopped, until its
// schedule-to-start timeout. They fail for good with ErrTypeWorkerLost instead, as
// the watch fails a dead worker's, and the workflow reconnects through a live worker.
// The SDK may not report an end once its worker stops, so an attempt that ends then
// keeps its record, and the others' watch fails it too should Temporal still run it.
type Recorder struct {
	interceptor.WorkerInterceptorBase
	records       Records
	hostTaskQueue string
	log           *zap.Logger
}

// NewRecorder returns the recorder of the worker whose host task queue is
// hostTaskQueue.
func NewRecorder(records Records, hostTaskQueue string, log *zap.Logger) (*Recorder, error) {
	if records == nil || hostTaskQueue == "" || log == nil {
		return nil, errors.New("hostwatch: a recorder needs its records, its host task queue and a logger")
	}
	return &Recorder{records: records, hostTaskQueue: hostTaskQueue, log: log}, nil
}

// InterceptActivity wraps each activity's execution with its record.
func (r *Recorder) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &recordingInbound{recorder: r}
	i.Next = next
	return i
}

type recordingInbound struct {
	interceptor.ActivityInboundInterceptorBase
	recorder *Recorder
}

// ExecuteActivity records the attempt before it runs and forgets it once it ended. A
// record that failed only leaves the attempt to Temporal's timeouts, should this
// worker die: the activity runs anyway.
func (i *recordingInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (interface{}, error) {
	r := i.recorder
	info := activity.GetInfo(ctx)
	onHostQueue := info.TaskQueue == r.hostTaskQueue
	if info.IsLocalActivity {
		return i.Next.ExecuteActivity(ctx, in) // its workflow task stands for it
	}
	a := store.WorkerActivity{
		HostTaskQueue: r.hostTaskQueue, TaskQueue: info.TaskQueue,
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		ActivityID: info.ActivityID, ActivityType: info.ActivityType.Name, Attempt: info.Attempt,
	}
	rctx, cancel := context.WithTimeout(ctx, recordTimeout)
	err := r.records.RecordWorkerActivity(rctx, a)
	cancel()
	if err != nil {
		r.log.Warn("record a running activity", zap.String("workflow_id", a.WorkflowID), zap.String("activity", a.ActivityType), zap.Error(err))
		res, err := i.Next.ExecuteActivity(ctx, in)
		return res, r.handBack(ctx, onHostQueue, &info, err)
	}
	defer func() {
		// An attempt that ends while this worker stops keeps its record: the SDK may
		// not report its end to Temporal any more, and then only the others' watch,
		// which fails the attempts of this worker that Temporal still runs once it is
		// gone, ends it before its timeouts. (A record left behind is harmless: should
		// this worker die, an attempt Temporal no longer runs is left alone.)
		if stopping(ctx) {
			return
		}
		// The activity's context may be cancelled by now; the record must still go.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		if err := r.records.ForgetWorkerActivity(fctx, a); err != nil {
			r.log.Info("forget an ended activity", zap.String("workflow_id", a.WorkflowID), zap.String("activity", a.ActivityType), zap.Error(err))
		}
	}()
	res, err := i.Next.ExecuteActivity(ctx, in)
	return res, r.handBack(ctx, onHostQueue, &info, err)
}

// handBack is the error an attempt ends with: its own, or, for a host activity that
// failed while this worker stops, ErrTypeWorkerLost for good.
func (r *Recorder) handBack(ctx context.Context, onHostQueue bool, info *activity.Info, err error) error {
	if err == nil || !onHostQueue || !stopping(ctx) {
		return err
	}
	r.log.Info("handing back a host activity this worker's stop cut short", zap.String("workflow_id", info.WorkflowExecution.ID),
		zap.String("activity", info.ActivityType.Name), zap.Error(err))
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the worker %s running attempt %d of %s stopped", r.hostTaskQueue, info.Attempt, info.ActivityType.Name),
		activities.ErrTypeWorkerLost, err)
}

// stopping reports whether the worker running the activity of ctx is stopping.
func stopping(ctx context.Context) bool {
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}
