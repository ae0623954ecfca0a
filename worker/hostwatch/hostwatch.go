// Package hostwatch owns a worker's liveness record and the failing of a dead
// worker's activities. When a worker dies, Temporal learns of it only at the timeouts
// of the activity attempts it was running: a Relay's heartbeat timeout (90 s) or a
// runtime's activation's (20 s), a host activity's start-to-close timeout, after which its
// retry waits on the dead worker's host task queue until its schedule-to-start timeout.
// The Session waits meanwhile: its stream stalls, or its first reply does not start.
//
// Every worker therefore marks itself alive in PostgreSQL each beat, through a
// connection it holds for its life (store.WorkerBeat), and records its activity
// attempts while they run (Recorder). It claims the workers that stopped: those whose
// beat's connection is gone (the process died: its operating system closed the
// connection) after a short grace, and those silent for longer (a hung process, or a
// machine gone without closing anything). It fails each attempt they were running, by
// its activity id, once Temporal says that attempt is still the one running: a host
// activity for good (the workflow reconnects through a live worker, as after any
// Relay's end), any other so that Temporal retries it on a live worker. A worker asked
// to stop hands back the host activities its stop cut short the same way (Recorder).
//
// A worker claims only after its own beats went through without a break for a while
// (the settling time), so after an outage of PostgreSQL, which ends every connection,
// every live worker has had the time to mark itself alive again, on a new connection,
// before anyone is judged. Failing an attempt whose worker was only slow is safe: the
// reader lease's generation fences a Relay, which ends once its lease keeper finds the
// lease taken or at its next heartbeat, and the activities the watch fails are ones
// the workflow already retries or reconnects after.
package hostwatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/store"
)

// Defaults for Options left zero.
const (
	// DefaultEvery is the time between two beats of a worker. A dead worker's
	// Sessions wait up to a beat of the others for its claim.
	DefaultEvery = 500 * time.Millisecond
	// DefaultGrace is how long a worker whose beat's connection is gone may go without
	// marking itself alive before it is judged dead: two beats, and a live worker whose
	// connection broke connects again at its next one.
	DefaultGrace = time.Second
	// DefaultSilence is how long a worker that keeps its connection may go without
	// marking itself alive before it is judged dead: several beats, so a slow
	// statement or a busy machine is not taken for a death.
	DefaultSilence = 6 * time.Second
	// DefaultSettle is how long a worker's own beats must have gone through without a
	// break before it judges others.
	DefaultSettle = 3 * time.Second
	// DefaultGiveUp is how long a claimed attempt is tried again while Temporal refuses
	// its failure; by then its own timeouts have ended it anyway.
	DefaultGiveUp = time.Minute
	// failAtOnce bounds the attempts of dead workers failed at once.
	failAtOnce = 16
)

// Beat marks this worker alive (store.WorkerBeat).
type Beat interface {
	Mark(ctx context.Context) error
}

// Store hands out dead workers (store.Store).
type Store interface {
	ClaimDeadWorkers(ctx context.Context, c store.DeadWorkerClaim) ([]store.DeadWorker, error)
}

var (
	_ Beat  = (*store.WorkerBeat)(nil)
	_ Store = (*store.Store)(nil)
)

// Temporal is what the watch asks of Temporal (Client adapts a client.Client).
type Temporal interface {
	// ResetStickyTaskQueue sends the workflow's next tasks to its task queue instead
	// of the sticky queue of the worker that last ran it.
	ResetStickyTaskQueue(ctx context.Context, namespace, workflowID, runID string) error
	// CompleteActivityByID completes (with err: fails) a running activity by its id.
	CompleteActivityByID(ctx context.Context, namespace, workflowID, runID, activityID string, result interface{}, err error) error
	// RunningAttempt is the attempt of the workflow's activity that a worker runs now,
	// or 0 when none does (the activity ended, or waits to be retried). An id names
	// only the activity, so the watch fails it only while its attempt is the one the
	// dead worker ran.
	RunningAttempt(ctx context.Context, namespace, workflowID, runID, activityID string) (int32, error)
}

// Client adapts a Temporal client to Temporal.
func Client(c client.Client) Temporal { return temporalClient{c} }

type temporalClient struct{ client.Client }

func (c temporalClient) ResetStickyTaskQueue(ctx context.Context, namespace, workflowID, runID string) error {
	_, err := c.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
	})
	return err
}

func (c temporalClient) RunningAttempt(ctx context.Context, namespace, workflowID, runID, activityID string) (int32, error) {
	d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
	})
	if err != nil {
		return 0, err
	}
	for _, p := range d.GetPendingActivities() {
		if p.GetActivityId() != activityID {
			continue
		}
		// A cancellation asked of a started attempt leaves it running until its
		// worker answers; an attempt not started yet is cancelled by Temporal itself.
		switch p.GetState() {
		case enumspb.PENDING_ACTIVITY_STATE_STARTED, enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED:
			return p.GetAttempt(), nil
		}
	}
	return 0, nil
}

// Options configures a Watch.
type Options struct {
	Beat     Beat
	Store    Store
	Temporal Temporal
	// Namespace is the Temporal namespace of the Session workflows.
	Namespace string
	// HostTaskQueue is this worker's host task queue, which names its liveness row.
	HostTaskQueue string
	// Every is the time between beats; zero is DefaultEvery.
	Every time.Duration
	// Grace is how long a worker whose beat's connection is gone is judged dead
	// after; zero is DefaultGrace.
	Grace time.Duration
	// Silence is how long any silent worker is judged dead after; zero is
	// DefaultSilence.
	Silence time.Duration
	// Settle is how long this worker's own beats must have gone through before it
	// judges others; zero is DefaultSettle.
	Settle time.Duration
	// GiveUp bounds how long a claimed attempt is tried again; zero is DefaultGiveUp.
	GiveUp time.Duration
	// Now is the clock; nil is time.Now.
	Now    func() time.Time
	Logger *zap.Logger
	// Metrics counts the dead workers claimed and their attempts failed; nil keeps
	// them in a registry of the watch's own.
	Metrics *telemetry.Metrics
}

// Watch beats for its worker and fails the activities of dead ones. Every worker runs
// one.
type Watch struct {
	opts Options
	// aliveSince is when this worker's unbroken run of beats began (zero after a
	// failed or late beat), and lastBeat when its last beat went through.
	aliveSince, lastBeat time.Time
	// pending are claimed attempts whose failure Temporal has not taken yet.
	pending []claimedActivity
}

// claimedActivity is a dead worker's activity attempt to fail.
type claimedActivity struct {
	store.WorkerActivity
	claimedAt time.Time
}

// New validates opts and returns a Watch.
func New(opts Options) (*Watch, error) {
	switch {
	case opts.Beat == nil || opts.Store == nil || opts.Temporal == nil || opts.Logger == nil:
		return nil, errors.New("hostwatch: beat, store, temporal and logger are required")
	case opts.Namespace == "" || opts.HostTaskQueue == "":
		return nil, errors.New("hostwatch: namespace and host task queue are required")
	case opts.Every < 0 || opts.Grace < 0 || opts.Silence < 0 || opts.Settle < 0 || opts.GiveUp < 0:
		return nil, fmt.Errorf("hostwatch: every %s, grace %s, silence %s, settle %s and give-up %s must not be negative",
			opts.Every, opts.Grace, opts.Silence, opts.Settle, opts.GiveUp)
	}
	opts.Every = cmp.Or(opts.Every, DefaultEvery)
	opts.Grace = cmp.Or(opts.Grace, DefaultGrace)
	opts.Silence = cmp.Or(opts.Silence, DefaultSilence)
	opts.Settle = cmp.Or(opts.Settle, DefaultSettle)
	if opts.Grace < 2*opts.Every || opts.Settle < 2*opts.Every || opts.Silence < opts.Grace {
		return nil, fmt.Errorf("hostwatch: grace %s and settle %s must be at least two beats (%s each), and silence %s at least the grace",
			opts.Grace, opts.Settle, opts.Every, opts.Silence)
	}
	opts.GiveUp = cmp.Or(opts.GiveUp, DefaultGiveUp)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Metrics == nil {
		opts.Metrics = telemetry.NewMetrics(opts.Logger)
	}
	return &Watch{opts: opts}, nil
}

// Run beats every Every until ctx is done.
func (w *Watch) Run(ctx context.Context) error {
	tick := time.NewTicker(w.opts.Every)
	defer tick.Stop()
	for {
		w.Beat(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Beat marks this worker alive, claims the dead workers (by their silence only once its
// own beats have gone through unbroken for the settling time; by their closed
// connection after the grace, before that time too when they beat while its own
// connection was up: store.DeadWorkerClaim), and fails the attempts claimed so far (which
// needs Temporal only, so it goes on while PostgreSQL is down). Each step's failure is
// logged; the next beat tries again. The claim and the failing take a beat's time at
// most, whatever Temporal and PostgreSQL do: a worker that stopped beating to fail a
// thousand Relays on a Temporal that does not answer would be judged dead itself.
func (w *Watch) Beat(ctx context.Context) {
	now := w.opts.Now()
	if w.mark(ctx) {
		if w.aliveSince.IsZero() || now.Sub(w.lastBeat) > 2*w.opts.Every {
			w.aliveSince = now
		}
		w.lastBeat = now
		w.claim(ctx, now, now.Sub(w.aliveSince) >= w.opts.Settle)
	} else {
		w.aliveSince = time.Time{}
	}
	fctx, cancel := context.WithTimeout(ctx, w.opts.Every)
	defer cancel()
	w.failClaimed(fctx, now)
}

// mark marks this worker alive and reports whether it went through. A mark slower than
// the silence is as good as none: the others may have judged this worker already.
func (w *Watch) mark(ctx context.Context) bool {
	mctx, cancel := context.WithTimeout(ctx, w.opts.Silence)
	defer cancel()
	err := w.opts.Beat.Mark(mctx)
	if err != nil && ctx.Err() == nil {
		w.opts.Logger.Warn("mark this worker alive", zap.Error(err))
	}
	return err == nil
}

// claim takes the dead workers and queues their attempts to fail.
func (w *Watch) claim(ctx context.Context, now time.Time, settled bool) {
	cctx, cancel := context.WithTimeout(ctx, w.opts.Every)
	defer cancel()
	dead, err := w.opts.Store.ClaimDeadWorkers(cctx, store.DeadWorkerClaim{
		Claimer: w.opts.HostTaskQueue, Silence: w.opts.Silence, Grace: w.opts.Grace, Settled: settled,
	})
	if err != nil {
		if ctx.Err() == nil {
			w.opts.Logger.Warn("claim dead workers", zap.Error(err))
		}
		return
	}
	w.opts.Metrics.DeadWorkers.Add(float64(len(dead)))
	for _, d := range dead {
		w.opts.Logger.Info("worker stopped marking itself alive; failing its activities",
			zap.String("dead_host_task_queue", d.HostTaskQueue), zap.Time("seen_at", d.SeenAt), zap.Int("activities", len(d.Activities)))
		for _, a := range d.Activities {
			w.pending = append(w.pending, claimedActivity{WorkerActivity: a, claimedAt: now})
		}
	}
}

// failClaimed fails each claimed attempt with ErrTypeWorkerLost, until ctx ends. An
// attempt Temporal no longer runs has ended already; one whose failure Temporal
// refused, or that ctx left untried, is tried at the next beat, until GiveUp.
func (w *Watch) failClaimed(ctx context.Context, now time.Time) {
	if len(w.pending) == 0 {
		return
	}
	kept := make([]bool, len(w.pending))
	var g errgroup.Group
	g.SetLimit(failAtOnce)
	for i, a := range w.pending {
		g.Go(func() error {
			kept[i] = !w.fail(ctx, a, now)
			return nil
		})
	}
	_ = g.Wait()
	left := w.pending[:0]
	for i, a := range w.pending {
		if kept[i] {
			left = append(left, a)
		}
	}
	clear(w.pending[len(left):])
	w.pending = left
}

// fail fails one attempt and reports whether it is settled (failed, no longer the one
// running, or given up on). The workflow's stickiness is reset first: the dead worker
// may be the one that last ran the workflow, and Temporal would offer the task the
// failure schedules to that worker's sticky queue, waiting for its sticky timeout (5
// s) before another worker gets it. On a live worker the reset costs one replay.
func (w *Watch) fail(ctx context.Context, a claimedActivity, now time.Time) bool {
	log := w.opts.Logger.With(zap.String("workflow_id", a.WorkflowID), zap.String("activity", a.ActivityType),
		zap.String("activity_id", a.ActivityID), zap.Int32("attempt", a.Attempt), zap.String("dead_host_task_queue", a.HostTaskQueue))
	err := w.failAttempt(ctx, a, log)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return true
	case errors.As(err, &notFound):
		return true // the workflow or the attempt ended meanwhile
	case now.Sub(a.claimedAt) >= w.opts.GiveUp:
		log.Warn("gave up failing the activity of a dead worker", zap.Error(err))
		return true
	default:
		if ctx.Err() == nil {
			log.Info("fail the activity of a dead worker; trying again", zap.Error(err))
		}
		return false
	}
}

// failAttempt fails the attempt if it is still the one running. A host activity
// fails for good: its retry would go to the dead worker's own queue. Any other is
// retried by Temporal on a live worker.
func (w *Watch) failAttempt(ctx context.Context, a claimedActivity, log *zap.Logger) error {
	running, err := w.opts.Temporal.RunningAttempt(ctx, w.opts.Namespace, a.WorkflowID, a.RunID, a.ActivityID)
	if err != nil || running != a.Attempt {
		return err
	}
	if err := w.opts.Temporal.ResetStickyTaskQueue(ctx, w.opts.Namespace, a.WorkflowID, a.RunID); err != nil && ctx.Err() == nil {
		// Only the wait for the sticky timeout is at stake: fail the attempt anyway.
		log.Info("reset the stickiness of a dead worker's workflow", zap.Error(err))
	}
	reason := fmt.Sprintf("the worker %s running attempt %d of %s stopped marking itself alive", a.HostTaskQueue, a.Attempt, a.ActivityType)
	lost := temporal.NewApplicationError(reason, activities.ErrTypeWorkerLost)
	if a.OnHostQueue() {
		lost = temporal.NewNonRetryableApplicationError(reason, activities.ErrTypeWorkerLost, nil)
	}
	if err := w.opts.Temporal.CompleteActivityByID(ctx, w.opts.Namespace, a.WorkflowID, a.RunID, a.ActivityID, nil, lost); err != nil {
		return err
	}
	log.Info("failed the activity of a dead worker", zap.Bool("retried", !a.OnHostQueue()))
	w.opts.Metrics.DeadWorkerActivities.WithLabelValues(a.ActivityType).Inc()
	return nil
}
