package hostwatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/worker/hostwatch"
)

// fakeStore is a PostgreSQL that can be down and hands out dead workers once.
type fakeStore struct {
	down  bool
	beats int
	// claims counts the settled claims, the ones that may judge a worker by its silence.
	claims int
	dead   []store.DeadWorker
	// last is the last claim asked.
	last store.DeadWorkerClaim
}

func (s *fakeStore) Mark(context.Context) error {
	if s.down {
		return errors.New("connection refused")
	}
	s.beats++
	return nil
}

// ClaimDeadWorkers hands out the dead workers to a settled claim: they are silent
// ones, whose claim waits for the settling time.
func (s *fakeStore) ClaimDeadWorkers(_ context.Context, c store.DeadWorkerClaim) ([]store.DeadWorker, error) {
	s.last = c
	if !c.Settled {
		return nil, nil
	}
	s.claims++
	dead := s.dead
	s.dead = nil
	return dead, nil
}

// fakeTemporal records the activities failed and answers with the next scripted
// error for each. An activity runs its first attempt unless attempts says otherwise.
type fakeTemporal struct {
	mu       sync.Mutex
	answers  map[string][]error
	attempts map[string]int32
	failed   map[string][]error
	reset    []string
}

func (c *fakeTemporal) RunningAttempt(_ context.Context, namespace, workflowID, runID, activityID string) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if namespace != "ns" || runID == "" {
		return 0, errors.New("unexpected call")
	}
	if attempt, ok := c.attempts[workflowID+"/"+activityID]; ok {
		return attempt, nil
	}
	return 1, nil
}

func (c *fakeTemporal) ResetStickyTaskQueue(_ context.Context, namespace, workflowID, runID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if namespace != "ns" || runID == "" {
		return errors.New("unexpected call")
	}
	c.reset = append(c.reset, workflowID)
	return nil
}

func (c *fakeTemporal) CompleteActivityByID(_ context.Context, namespace, workflowID, runID, activityID string, result interface{}, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if result != nil || namespace != "ns" || runID == "" {
		return errors.New("unexpected call")
	}
	c.failed[workflowID+"/"+activityID] = append(c.failed[workflowID+"/"+activityID], err)
	answers := c.answers[workflowID]
	if len(answers) == 0 {
		return nil
	}
	c.answers[workflowID] = answers[1:]
	return answers[0]
}

const deadQueue = "q/host/dead"

// relay is a Relay the dead worker ran, taken from its host task queue.
func relay(session, activityID string) store.WorkerActivity {
	return running(session, activityID, "Relay", deadQueue, 1)
}

// running is an attempt the dead worker ran, taken from queue.
func running(session, activityID, activityType, queue string, attempt int32) store.WorkerActivity {
	return store.WorkerActivity{
		HostTaskQueue: deadQueue, TaskQueue: queue, WorkflowID: "session/" + session, RunID: "run-" + session,
		ActivityID: activityID, ActivityType: activityType, Attempt: attempt,
	}
}

// TestWatchClaimsOnlyAfterItsOwnBeatsWentThroughForTheSettlingTime: after PostgreSQL
// was down, a worker judges no other before it has beaten without a break for the
// settling time, so every live worker had the time to beat again. A dead worker's
// attempts are failed with ErrTypeWorkerLost, for good when taken from its host task
// queue and retryably when not, once Temporal says they are still the ones running;
// one whose failure Temporal refused is tried again at the next beat, and one Temporal
// no longer knows is settled.
func TestWatchClaimsOnlyAfterItsOwnBeatsWentThroughForTheSettlingTime(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	st := &fakeStore{}
	tc := &fakeTemporal{
		answers: map[string][]error{
			"session/b": {errors.New("frontend unavailable")},
			"session/c": {serviceerror.NewNotFound("activity not found")},
		},
		attempts: map[string]int32{
			"session/d/5": 2, // this attempt, on the shared queue
			"session/e/5": 3, // retried since, on another worker
			"session/f/8": 0, // ended since
		},
		failed: map[string][]error{},
	}
	metrics := telemetry.NewMetrics(zap.NewNop())
	w, err := hostwatch.New(hostwatch.Options{
		Beat: st, Store: st, Temporal: tc, Namespace: "ns", HostTaskQueue: "astrabox/host/me",
		Every: time.Second, Grace: 2 * time.Second, Settle: 3 * time.Second, Now: func() time.Time { return now }, Logger: zap.NewNop(), Metrics: metrics,
	})
	require.NoError(t, err)
	ctx := context.Background()
	beat := func() {
		w.Beat(ctx)
		now = now.Add(time.Second)
	}

	beat()
	beat()
	st.down = true
	beat()
	st.down = false
	beat() // the unbroken run starts again here
	beat()
	beat()
	assert.Zero(t, st.claims, "three beats of one second each since the outage are not yet the settling time")
	st.dead = []store.DeadWorker{{HostTaskQueue: deadQueue, Activities: []store.WorkerActivity{
		relay("a", "12"), relay("b", "7"), relay("c", "9"),
		running("d", "5", "PrepareRuntime", "q", 2),
		running("e", "5", "PrepareRuntime", "q", 2),
		running("f", "8", "Deliver", deadQueue, 1),
	}}}
	beat()
	assert.Equal(t, 1, st.claims)
	assert.Equal(t, store.DeadWorkerClaim{Claimer: "astrabox/host/me", Silence: hostwatch.DefaultSilence, Grace: 2 * time.Second, Settled: true}, st.last)
	assert.Equal(t, 1.0, promtest.ToFloat64(metrics.DeadWorkers))
	assert.Equal(t, 1.0, promtest.ToFloat64(metrics.DeadWorkerActivities.WithLabelValues("Relay")), "the failure Temporal took; the one it refused is tried again, the one it no longer knew had ended")
	assert.Equal(t, 1.0, promtest.ToFloat64(metrics.DeadWorkerActivities.WithLabelValues("PrepareRuntime")))
	require.Len(t, tc.failed, 4, "every attempt the dead worker was running still was failed")
	assert.ElementsMatch(t, []string{"session/a", "session/b", "session/c", "session/d"}, tc.reset,
		"each workflow's next task goes to the task queue, not to the dead worker's sticky queue")
	for id, errs := range tc.failed {
		var app *temporal.ApplicationError
		require.ErrorAs(t, errs[0], &app, id)
		assert.Equal(t, activities.ErrTypeWorkerLost, app.Type(), id)
		assert.Equal(t, id != "session/d/5", app.NonRetryable(), "%s: a host activity fails for good, one from the shared queue is retried", id)
	}

	st.down = true
	claims := st.claims
	beat()
	st.down = false
	assert.Equal(t, claims, st.claims, "no claim without a beat of its own")
	assert.Len(t, tc.failed["session/a/12"], 1, "a failed Relay is settled")
	assert.Len(t, tc.failed["session/c/9"], 1, "a Relay Temporal no longer knows is settled")
	assert.Len(t, tc.failed["session/d/5"], 1, "a failed preparation is settled")
	assert.Len(t, tc.failed["session/b/7"], 2, "a Relay whose failure Temporal refused is tried again, with PostgreSQL down too")
	beat()
	assert.Len(t, tc.failed["session/b/7"], 2, "and settled once Temporal took it")
	assert.Equal(t, 2.0, promtest.ToFloat64(metrics.DeadWorkerActivities.WithLabelValues("Relay")))
	assert.NotContains(t, tc.failed, "session/e/5", "an attempt retried elsewhere is left to run")
	assert.NotContains(t, tc.failed, "session/f/8", "an attempt that ended is left")

	// A beat that comes late (the process was stopped) starts the run again too.
	claims = st.claims
	now = now.Add(10 * time.Second)
	beat()
	assert.Equal(t, claims, st.claims)
}

func TestNewRefusesAGraceOrSettlingTimeShorterThanTwoBeats(t *testing.T) {
	t.Parallel()
	for _, o := range []hostwatch.Options{{Grace: time.Second}, {Settle: time.Second}, {Grace: 4 * time.Second, Silence: 3 * time.Second}} {
		o.Beat, o.Store, o.Temporal, o.Namespace, o.HostTaskQueue, o.Logger = &fakeStore{}, &fakeStore{}, &fakeTemporal{}, "ns", "astrabox/host/me", zap.NewNop()
		o.Every = time.Second
		_, err := hostwatch.New(o)
		require.ErrorContains(t, err, "at least two beats", "%+v", o)
	}
	_, err := hostwatch.New(hostwatch.Options{Beat: &fakeStore{}, Store: &fakeStore{}, Temporal: &fakeTemporal{}, Namespace: "ns", HostTaskQueue: "astrabox/host/me", Logger: zap.NewNop()})
	require.NoError(t, err, "the defaults")
}

// stuckTemporal answers no call until the caller gives up, and counts the calls made
// before that.
type stuckTemporal struct{ calls atomic.Int64 }

func (c *stuckTemporal) RunningAttempt(ctx context.Context, _, _, _, _ string) (int32, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	c.calls.Add(1)
	<-ctx.Done()
	return 0, ctx.Err()
}

func (c *stuckTemporal) ResetStickyTaskQueue(ctx context.Context, _, _, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

func (c *stuckTemporal) CompleteActivityByID(ctx context.Context, _, _, _, _ string, _ interface{}, _ error) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestABeatTakesABeatsTimeWhenTemporalDoesNotAnswer: failing a dead worker's many
// Relays on a Temporal that does not answer must not stop this worker's own beats, or
// the others would judge it dead too. Each beat gives the failing a beat's time, and
// the next beat tries again.
func TestABeatTakesABeatsTimeWhenTemporalDoesNotAnswer(t *testing.T) {
	t.Parallel()
	const every = 20 * time.Millisecond
	now := time.Unix(1_000_000, 0)
	st := &fakeStore{}
	tc := &stuckTemporal{}
	w, err := hostwatch.New(hostwatch.Options{
		Beat: st, Store: st, Temporal: tc, Namespace: "ns", HostTaskQueue: "astrabox/host/me",
		Every: every, Grace: 2 * every, Settle: 2 * every, Silence: 6 * every,
		Now: func() time.Time { return now }, Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	var relays []store.WorkerActivity
	for i := range 1000 {
		relays = append(relays, relay(fmt.Sprint(i), "5"))
	}
	st.dead = []store.DeadWorker{{HostTaskQueue: deadQueue, Activities: relays}}
	ctx, cancel := context.WithTimeout(testutil.Context(t), time.Minute)
	defer cancel()
	for range 4 {
		w.Beat(ctx)
		now = now.Add(every)
	}
	assert.Equal(t, 4, st.beats, "every beat marked this worker alive")
	assert.Equal(t, 2, st.claims, "the third and fourth beats claimed, after the settling time")
	// The third and fourth beats each began 16 calls at once, which Temporal left
	// unanswered until the beat's time ran out; the rest waited for the next beat.
	assert.Equal(t, int64(2*16), tc.calls.Load())
}
