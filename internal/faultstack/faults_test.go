package faultstack_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/faultstack"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// Bounds of the suite. One stack serves every subtest (starting one costs a
// build, a cluster, Temporal and two processes), so they run one after another.
const (
	suiteTimeout   = 14 * time.Minute
	faultTimeout   = 4 * time.Minute
	slowWords      = 24
	slowChunks     = 16
	slowChunkDelay = 400 * time.Millisecond
)

// TestFaults breaks the running platform the ways production breaks it and
// checks, through the public API only, that every message is answered exactly
// once with the scripted model's exact text, on streams the `ai` client
// accepts with contiguous seqs, and that no fault TERMINATES a Session.
//
// Subtests share one stack and run in order, not in parallel: each kills
// processes every other one depends on. A fault that leaves a process down
// is reported by its own subtest, and the next one starts it again.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform with real boxes")
	}
	f := startFixture(t, faultstack.Options{})

	t.Run("worker killed mid-reply", f.workerKilledMidReply)
	t.Run("worker stopped mid-reply", f.workerStoppedMidReply)
	t.Run("worker killed while it makes the box", f.workerKilledWhileItMakesTheBox)
	t.Run("worker killed while it starts the runtime", f.workerKilledWhileItStartsTheRuntime)
	t.Run("worker stopped while it starts the runtime", f.workerStoppedWhileItStartsTheRuntime)
	t.Run("worker killed after the program's output was committed", f.workerKilledAfterCommit)
	t.Run("api killed mid-stream", f.apiKilledMidStream)
	t.Run("box killed mid-reply", f.boxKilledMidReply)
	t.Run("postgres restarted mid-reply", f.postgresRestartedMidReply)
	t.Run("temporal restarted mid-reply", f.temporalRestartedMidReply)
	t.Run("ten messages in parallel", f.tenMessagesInParallel)
	t.Run("idle sessions and permission modes across a restart", f.restartWithIdleSessions)
}

// startFixture starts a stack for one top-level test, bounded by suiteTimeout and
// go test's own deadline, and stops it when the test ends.
func startFixture(t *testing.T, opts faultstack.Options) *fixture {
	t.Helper()
	localtest.RequireBoxes(t)
	// Bounded by go test's own deadline too, so the stack is always stopped.
	ctx := testutil.ContextWithTimeout(t, suiteTimeout)
	checker, err := faultstack.NewChecker()
	require.NoError(t, err, "run `make deps-npm`")
	started := time.Now()
	s, err := faultstack.Start(ctx, opts)
	require.NoError(t, err)
	t.Logf("stack up in %s", time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs:\n%s", s.LogTails(6000))
		}
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		assert.NoError(t, s.Close(closeCtx), "stop the stack and leave nothing running")
	})
	return &fixture{s: s, c: s.Client, k: checker, suite: ctx}
}

// releasedIdle is the workers' sandbox.idle_release in TestReleasedSessions: a box
// idle that long is released.
const releasedIdle = "3s"

// TestReleasedSessions: a Session whose idle box was released has no box. Through a
// restart of Temporal, serve and the worker, a permission mode set while it has none
// and messages sent to it at once, every message is answered exactly once in a new box
// that resumes the conversation, in the mode set.
func TestReleasedSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform with real boxes")
	}
	f := startFixture(t, faultstack.Options{RoleEnv: func(role string) []string {
		if role == "worker" {
			return []string{"ASTRABOX_SANDBOX_IDLE_RELEASE=" + releasedIdle}
		}
		return nil
	}})
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "released")
	f.converse(t, ctx, sid, faultstack.TextTurn("released-before"))
	_, err := f.c.WaitSession(ctx, sid, "the idle box to be released", func(v faultstack.SessionView) bool {
		return v.RuntimeUnavailable && faultstack.Settled(v)
	})
	require.NoError(t, err)

	require.NoError(t, f.s.RestartTemporal(ctx), "SIGKILL the Temporal dev server, start it again")
	require.NoError(t, f.s.RestartPlatform(ctx), "SIGKILL serve and worker, start them again")
	require.NoError(t, f.c.SetPermissionMode(ctx, sid, "acceptEdits"))

	const n = 3
	want := f.sendAtOnce(t, ctx, sid, "released-after", n)
	f.requireRepliesAmong(t, f.requireAudit(t, ctx, sid, n+1), want)
	view, err := f.c.Session(ctx, sid)
	require.NoError(t, err)
	require.NotNil(t, view.PermissionMode)
	assert.Equal(t, "acceptEdits", *view.PermissionMode, "the mode set while the Session had no box")
}

// TestTwoWorkersThroughAPostgresRestart: a restart of PostgreSQL ends every
// connection and silences every worker's beat at once, here for longer than the
// grace after which a worker whose connection is gone counts as dead. Once it is
// back, no live worker may be taken for dead by the other: each worker's liveness row
// is still the one it started with (a claim deletes it), no Relay was failed for its
// worker, and each Session's reply, one of them in flight through the restart, is
// read whole.
func TestTwoWorkersThroughAPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform with real boxes")
	}
	f := startFixture(t, faultstack.Options{})
	ctx := f.begin(t)
	require.NoError(t, f.s.StartExtra("worker", "worker-2", nil))
	var sessions []string
	for i := range 4 {
		sid := f.newSession(t, ctx, fmt.Sprintf("two-workers-%d", i))
		f.converse(t, ctx, sid, faultstack.TextTurn(fmt.Sprintf("two-workers-%d-before", i)))
		sessions = append(sessions, sid)
	}
	before := f.workerRows(t, ctx)
	require.Len(t, before, 2, "both workers beat")
	turn := faultstack.SlowTurn("two-workers", slowWords, slowChunks, slowChunkDelay)
	tr := f.midReply(t, ctx, sessions[0], turn, func() error {
		if err := f.s.StopPostgres(ctx); err != nil {
			return err
		}
		// Down until each worker has missed three beats: longer than the grace.
		for _, name := range []string{"worker", "worker-2"} {
			if err := waitForLogLines(ctx, filepath.Join(f.s.LogDir(), name+".log"), "mark this worker alive", 3); err != nil {
				return err
			}
		}
		return f.s.StartPostgres(ctx)
	})
	f.requireReply(t, ctx, tr, turn)
	for i, sid := range sessions {
		f.converse(t, ctx, sid, faultstack.TextTurn(fmt.Sprintf("two-workers-%d-after", i)))
		ends, err := f.s.ActivityEnds(ctx, sid, "Relay")
		require.NoError(t, err)
		assert.NotContains(t, ends, activities.ErrTypeWorkerLost, "no live worker was taken for dead (Session %d)", i)
	}
	assert.Equal(t, before, f.workerRows(t, ctx), "each worker's liveness row is the one it started with")
	a := f.requireAudit(t, ctx, sessions[0], 3)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 3}, a.Outcomes)
}

// workerRows reads when each worker's liveness row was written first, by its host
// task queue.
func (f *fixture) workerRows(t *testing.T, ctx context.Context) map[string]time.Time {
	t.Helper()
	conn, err := pgx.Connect(ctx, f.s.DSN())
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT host_task_queue, started_at FROM workers`)
	require.NoError(t, err)
	defer rows.Close()
	started := map[string]time.Time{}
	for rows.Next() {
		var queue string
		var at time.Time
		require.NoError(t, rows.Scan(&queue, &at))
		started[queue] = at
	}
	require.NoError(t, rows.Err())
	return started
}

// waitForLogLines waits until the log at path has n lines holding substr.
func waitForLogLines(ctx context.Context, path, substr string, n int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if strings.Count(string(raw), substr) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d lines of %q in %s: %w", n, substr, path, ctx.Err())
		case <-tick.C:
		}
	}
}

type fixture struct {
	s     *faultstack.Stack
	c     *faultstack.Client
	k     *faultstack.Checker
	suite context.Context
}

// begin bounds a subtest, starts again whatever an earlier one left down, and
// checks at the end that no process of the platform crashed on its own.
func (f *fixture) begin(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.suite, faultTimeout)
	t.Cleanup(cancel)
	healed, err := f.s.Heal(ctx)
	require.NoError(t, err, "restart what an earlier fault left down (%v)", healed)
	started := time.Now()
	t.Cleanup(func() {
		assert.NoError(t, f.s.Crashed(), "a platform process exited on its own")
		t.Logf("took %s", time.Since(started).Round(time.Millisecond))
	})
	return ctx
}

func (f *fixture) newSession(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	id, err := f.c.CreateSession(ctx, f.s.AgentID, name+"-"+randomHex())
	require.NoError(t, err)
	return id
}

// converse sends a turn, reads its response to the end and checks the text.
func (f *fixture) converse(t *testing.T, ctx context.Context, sessionID string, turn faultstack.Turn) faultstack.Receipt {
	t.Helper()
	receipt, err := f.c.Send(ctx, sessionID, turn.Content, "m-"+randomHex())
	require.NoError(t, err)
	tr, err := f.c.Follow(ctx, sessionID, receipt.OutputSeq, faultstack.FollowOptions{WatchSession: true})
	require.NoError(t, err, "read the reply (parts so far %v)", tr.Types())
	f.requireReply(t, ctx, tr, turn)
	return receipt
}

// requireReply validates a response's stream with the ai client and checks
// its text is the scripted reply, once.
func (f *fixture) requireReply(t *testing.T, ctx context.Context, tr faultstack.Transcript, turn faultstack.Turn) {
	t.Helper()
	msg, err := f.k.Reply(ctx, tr)
	require.NoError(t, err)
	assert.Equal(t, turn.Reply, faultstack.Text(msg), "the reply, exactly once (parts %v)", tr.Types())
}

// midReply sends a slow turn, waits until the stream shows the reply's first
// text delta, injects the fault, then follows the stream to its end,
// resuming from the last seq whenever it breaks off.
func (f *fixture) midReply(t *testing.T, ctx context.Context, sessionID string, turn faultstack.Turn, fault func() error) faultstack.Transcript {
	t.Helper()
	receipt, err := f.c.Send(ctx, sessionID, turn.Content, "m-"+randomHex())
	require.NoError(t, err)
	firstDelta := make(chan struct{})
	var once sync.Once
	type result struct {
		tr  faultstack.Transcript
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := f.c.Follow(ctx, sessionID, receipt.OutputSeq, faultstack.FollowOptions{WatchSession: true, OnPart: func(p faultstack.Part) {
			if p.Type == faultstack.PartTextDelta {
				once.Do(func() { close(firstDelta) })
			}
		}})
		done <- result{tr, err}
	}()
	select {
	case <-firstDelta:
	case r := <-done:
		t.Fatalf("the stream ended before the reply's first text delta: %v (parts %v)", r.err, r.tr.Types())
	case <-ctx.Done():
		t.Fatalf("no text delta before the deadline: %v", ctx.Err())
	}
	require.NoError(t, fault(), "inject the fault")
	r := <-done
	require.NoError(t, r.err, "follow the reply through the fault (parts so far %v)", r.tr.Types())
	return r.tr
}

// requireAudit waits for the Session to settle, then checks custody and
// delivery over its whole history and a replay of its whole stream.
func (f *fixture) requireAudit(t *testing.T, ctx context.Context, sessionID string, inputs int) faultstack.Audit {
	t.Helper()
	_, err := f.c.WaitSession(ctx, sessionID, "the Session to settle", faultstack.Settled)
	require.NoError(t, err)
	a, err := f.c.Audit(ctx, f.k, sessionID)
	require.NoError(t, err)
	assert.NoError(t, a.Err())
	assert.Equal(t, inputs, a.Inputs, "inputs recorded")
	return a
}

func (f *fixture) workerKilledMidReply(t *testing.T) {
	f.workerGoneMidReply(t, "worker", func(ctx context.Context) error { return f.s.RestartWorker(ctx) })
}

// workerStoppedMidReply: a rollout stops the worker (SIGTERM) while it relays a reply,
// and starts a new one. The stopping worker's Relay ends and the workflow reconnects
// through the new worker, which reads on from the recorded cursor: the reply arrives
// whole and once.
func (f *fixture) workerStoppedMidReply(t *testing.T) {
	f.workerGoneMidReply(t, "stopped", func(ctx context.Context) error {
		if err := f.s.StopWorker(ctx); err != nil {
			return err
		}
		return f.s.StartWorker()
	})
}

// workerGoneMidReply replaces the worker (replace) once the reply's first delta is on
// the stream, and checks the reply whole and once, and that the new worker, or the
// stopping one, failed its Relay: the Session did not wait for the Relay's heartbeat
// timeout.
func (f *fixture) workerGoneMidReply(t *testing.T, name string, replace func(context.Context) error) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, name)
	turn := faultstack.SlowTurn(name, slowWords, slowChunks, slowChunkDelay)
	tr := f.midReply(t, ctx, sid, turn, func() error { return replace(ctx) })
	f.requireReply(t, ctx, tr, turn)
	a := f.requireAudit(t, ctx, sid, 1)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 1}, a.Outcomes)
	ends, err := f.s.ActivityEnds(ctx, sid, "Relay")
	require.NoError(t, err)
	assert.Equal(t, []string{activities.ErrTypeWorkerLost}, ends, "how the Relays that did not complete ended")
}

// workerKilledWhileItMakesTheBox: the worker preparing a new Session's box dies, with
// the Session's first message held. The new worker fails the preparation for it, and
// Temporal retries it on the new worker at once instead of after the preparation's
// heartbeat timeout; the message is answered once.
func (f *fixture) workerKilledWhileItMakesTheBox(t *testing.T) {
	f.workerGoneWhile(t, "preparing", "PrepareRuntime", false, f.s.KillWorker)
}

// workerKilledWhileItStartsTheRuntime: the worker starting a new Session's program
// in its box dies, with the Session's first message held. The new worker fails the
// activation for it instead of the Session waiting for the activation's heartbeat
// timeout and then for its retry on the dead worker's queue; the workflow reconnects
// to the same box through the new worker, and the message is answered once.
func (f *fixture) workerKilledWhileItStartsTheRuntime(t *testing.T) {
	f.workerGoneWhile(t, "activating", "ActivateRuntime", true, f.s.KillWorker)
}

// workerStoppedWhileItStartsTheRuntime: the same with the worker asked to stop, as a
// rollout does. The activation its stop cut short fails for good instead of being
// retried on the stopped worker's queue, where it would wait out its schedule-to-start
// timeout.
func (f *fixture) workerStoppedWhileItStartsTheRuntime(t *testing.T) {
	f.workerGoneWhile(t, "activating-stopped", "ActivateRuntime", true, f.s.StopWorker)
}

// workerGoneWhile sends a new Session its first message, ends the worker (gone) while
// it runs the Session's activityType, and starts a new one. The message is answered
// once, in the box placed before the end when the activity runs in one (placed), and
// the attempt the end cut short was failed for the worker (WorkerLost), not timed out.
func (f *fixture) workerGoneWhile(t *testing.T, name, activityType string, placed bool, gone func(context.Context) error) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, name)
	turn := faultstack.TextTurn(name)
	receipt, err := f.c.Send(ctx, sid, turn.Content, "m-"+randomHex())
	require.NoError(t, err)
	_, err = f.s.WaitActivityRunning(ctx, sid, activityType)
	require.NoError(t, err)
	var box string
	if placed {
		box, err = f.s.SessionBox(ctx, sid)
		require.NoError(t, err)
	}
	require.NoError(t, gone(ctx))
	require.NoError(t, f.s.StartWorker())
	tr, err := f.c.Follow(ctx, sid, receipt.OutputSeq, faultstack.FollowOptions{WatchSession: true})
	require.NoError(t, err, "read the reply (parts so far %v)", tr.Types())
	f.requireReply(t, ctx, tr, turn)
	a := f.requireAudit(t, ctx, sid, 1)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 1}, a.Outcomes)
	if placed {
		after, err := f.s.SessionBox(ctx, sid)
		require.NoError(t, err)
		assert.Equal(t, box, after, "the same box")
	}
	ends, err := f.s.ActivityEnds(ctx, sid, activityType)
	require.NoError(t, err)
	assert.Equal(t, []string{activities.ErrTypeWorkerLost}, ends, "how the %s attempts that did not complete ended", activityType)
}

// committedChunks makes one reply write more journal lines than the Claude
// client's commit step (engines/claude defaultCommitEvery, 256), so the runner
// has released the start of the program's output before the fault.
const committedChunks = 320

func (f *fixture) workerKilledAfterCommit(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "committed")
	f.converse(t, ctx, sid, faultstack.SlowTurn("committed", committedChunks, committedChunks, time.Millisecond))
	f.converse(t, ctx, sid, faultstack.TextTurn("committed-before"))
	require.NoError(t, f.s.RestartWorker(ctx))
	// The new worker attaches to the program still running in its box.
	f.converse(t, ctx, sid, faultstack.TextTurn("committed-after"))
	a := f.requireAudit(t, ctx, sid, 3)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 3}, a.Outcomes)
}

func (f *fixture) apiKilledMidStream(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "api")
	turn := faultstack.SlowTurn("api", slowWords, slowChunks, slowChunkDelay)
	tr := f.midReply(t, ctx, sid, turn, func() error { return f.s.RestartAPI(ctx) })
	assert.GreaterOrEqual(t, tr.Reconnects, 1, "the cut stream was resumed with after_seq")
	f.requireReply(t, ctx, tr, turn)
	a := f.requireAudit(t, ctx, sid, 1)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 1}, a.Outcomes)
}

func (f *fixture) boxKilledMidReply(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "box")
	tag := "box" + randomHex()
	first := faultstack.SlowTurn(tag, slowWords, slowChunks, slowChunkDelay)
	var killed string
	tr := f.midReply(t, ctx, sid, first, func() (err error) {
		killed, err = f.s.KillBox(ctx, sid)
		return err
	})
	_, err := f.k.Reply(ctx, tr)
	require.NoError(t, err, "the cut response is still a valid stream")
	view, err := f.c.WaitSession(ctx, sid, "the lost response to end", faultstack.Settled)
	require.NoError(t, err)
	require.NotNil(t, view.LastResponse)
	require.NotNil(t, view.LastResponse.Outcome, "the response has an outcome")
	assert.Equal(t, faultstack.OutcomeFailed, *view.LastResponse.Outcome)
	require.NotNil(t, view.LastResponse.NativeReason)
	assert.Equal(t, faultstack.ReasonRuntimeLost, *view.LastResponse.NativeReason)

	// The next message runs on a new box, in the same conversation: the model
	// is asked with the earlier turn in its history.
	second := faultstack.TextTurn("after-" + tag)
	f.converse(t, ctx, sid, second)
	box, err := f.s.SessionBox(ctx, sid)
	require.NoError(t, err)
	assert.NotEqual(t, killed, box, "a new box")
	asked := false
	for _, r := range f.s.Model().Requests() {
		if strings.Contains(r.Prompt, "after-"+tag) {
			asked = true
			assert.Contains(t, string(r.Body), "Slow reply "+tag, "the resumed conversation carries the earlier turn")
		}
	}
	assert.True(t, asked, "the model was asked for the second turn")
	a := f.requireAudit(t, ctx, sid, 2)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 1, faultstack.OutcomeFailed + "/" + faultstack.ReasonRuntimeLost: 1}, a.Outcomes)
}

func (f *fixture) postgresRestartedMidReply(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "postgres")
	turn := faultstack.SlowTurn("postgres", slowWords, slowChunks, slowChunkDelay)
	f.c.Outages()
	tr := f.midReply(t, ctx, sid, turn, func() error {
		if err := f.s.StopPostgres(ctx); err != nil {
			return err
		}
		// While the database is down the API says so: 503 with Retry-After,
		// on a JSON route and on the stream alike.
		for _, path := range []string{"/sessions/" + sid, "/sessions/" + sid + "/stream?after_seq=0"} {
			status, code, retryAfter, err := f.c.Probe(ctx, path)
			if assert.NoError(t, err) {
				assert.Equal(t, 503, status, "GET %s during the outage", path)
				assert.Equal(t, "SERVICE_UNAVAILABLE", code, "GET %s during the outage", path)
				assert.NotEmpty(t, retryAfter, "GET %s during the outage carries Retry-After", path)
			}
		}
		return f.s.StartPostgres(ctx)
	})
	f.requireReply(t, ctx, tr, turn)
	// The reader's own retries during the outage saw the same answer.
	var wrong []faultstack.OutageAnswer
	for _, o := range f.c.Outages() {
		if o.Status != 503 || o.RetryAfter == "" {
			wrong = append(wrong, o)
		}
	}
	assert.Empty(t, wrong, "outage answers other than 503 with Retry-After")
	a := f.requireAudit(t, ctx, sid, 1)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 1}, a.Outcomes)
}

func (f *fixture) temporalRestartedMidReply(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "temporal")
	turn := faultstack.SlowTurn("temporal", slowWords, slowChunks, slowChunkDelay)
	tr := f.midReply(t, ctx, sid, turn, func() error { return f.s.RestartTemporal(ctx) })
	f.requireReply(t, ctx, tr, turn)
	// The next message goes through the restarted Temporal.
	f.converse(t, ctx, sid, faultstack.TextTurn("temporal-after"))
	a := f.requireAudit(t, ctx, sid, 2)
	assert.Equal(t, map[string]int{faultstack.OutcomeComplete: 2}, a.Outcomes)
}

// sendAtOnce sends n text turns to the Session at the same moment and returns each
// input's expected reply by input id.
func (f *fixture) sendAtOnce(t *testing.T, ctx context.Context, sessionID, name string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			turn := faultstack.TextTurn(fmt.Sprintf("%s-%d", name, i))
			receipt, err := f.c.Send(ctx, sessionID, turn.Content, fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			want[receipt.InputID] = turn.Reply
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return want
}

// requireRepliesAmong checks the replies to inputs sent at once. Claude Code may take
// queued messages together: a response then answers several inputs, with the reply
// to one of them.
func (f *fixture) requireRepliesAmong(t *testing.T, a faultstack.Audit, want map[string]string) {
	t.Helper()
	for _, r := range a.Responses {
		var allowed []string
		for _, id := range r.InputIDs {
			if reply, ok := want[id]; ok {
				allowed = append(allowed, reply)
			}
		}
		if len(allowed) > 0 {
			assert.Contains(t, allowed, r.Text, "response %s answers inputs %v", r.ResponseID, r.InputIDs)
		}
	}
}

func (f *fixture) tenMessagesInParallel(t *testing.T) {
	ctx := f.begin(t)
	sid := f.newSession(t, ctx, "parallel")
	f.converse(t, ctx, sid, faultstack.TextTurn("parallel-warm"))
	const n = 10
	want := f.sendAtOnce(t, ctx, sid, "parallel", n)
	// Ten short replies take well under a minute even on a loaded machine;
	// messages still held after two are held for good.
	settleCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f.requireRepliesAmong(t, f.requireAudit(t, settleCtx, sid, n+1), want)
}

func (f *fixture) restartWithIdleSessions(t *testing.T) {
	ctx := f.begin(t)
	fresh := f.newSession(t, ctx, "fresh")
	used := f.newSession(t, ctx, "used")
	moded := map[string]string{}
	for _, mode := range claude.PermissionModes {
		moded[mode] = f.newSession(t, ctx, "mode-"+mode)
	}
	t.Run("before the restart", func(t *testing.T) {
		t.Run("used", func(t *testing.T) {
			t.Parallel()
			f.converse(t, ctx, used, faultstack.TextTurn("used-before"))
		})
		for _, mode := range claude.PermissionModes {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				sid := moded[mode]
				f.converse(t, ctx, sid, faultstack.TextTurn("mode-before-"+mode))
				require.NoError(t, f.c.SetPermissionMode(ctx, sid, mode))
				f.converse(t, ctx, sid, faultstack.TextTurn("mode-set-"+mode))
				view, err := f.c.Session(ctx, sid)
				require.NoError(t, err)
				require.NotNil(t, view.PermissionMode)
				assert.Equal(t, mode, *view.PermissionMode)
			})
		}
	})
	// The fresh Session never had a message; every Session is idle.
	_, err := f.c.WaitSession(ctx, fresh, "the fresh Session to be ready", faultstack.Settled)
	require.NoError(t, err)
	require.NoError(t, f.s.RestartPlatform(ctx), "SIGKILL serve and worker, start them again")

	t.Run("after the restart", func(t *testing.T) {
		t.Run("fresh", func(t *testing.T) {
			t.Parallel()
			f.converse(t, ctx, fresh, faultstack.TextTurn("fresh-after"))
			f.requireAudit(t, ctx, fresh, 1)
		})
		t.Run("used", func(t *testing.T) {
			t.Parallel()
			f.converse(t, ctx, used, faultstack.TextTurn("used-after"))
			f.requireAudit(t, ctx, used, 2)
		})
		for _, mode := range claude.PermissionModes {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				sid := moded[mode]
				f.converse(t, ctx, sid, faultstack.TextTurn("mode-after-"+mode))
				view, err := f.c.Session(ctx, sid)
				require.NoError(t, err)
				require.NotNil(t, view.PermissionMode)
				assert.Equal(t, mode, *view.PermissionMode, "the mode survives the restart")
				inputs := 3
				switch mode {
				case "bypassPermissions":
					// The program really runs in the mode: no approval asked.
					f.converseTool(t, ctx, sid, faultstack.BashTurn("bypass", "touch bypass.txt"), false)
					inputs++
				case "default":
					f.converseTool(t, ctx, sid, faultstack.BashTurn("approved", "touch approved.txt"), true)
					inputs++
				}
				f.requireAudit(t, ctx, sid, inputs)
			})
		}
	})
}

// converseTool sends a turn that runs a command. With wantApproval the
// program must ask first and the approval is answered through the API;
// without, an approval request fails the test (and is denied so the
// Session settles).
func (f *fixture) converseTool(t *testing.T, ctx context.Context, sessionID string, turn faultstack.Turn, wantApproval bool) {
	t.Helper()
	receipt, err := f.c.Send(ctx, sessionID, turn.Content, "m-"+randomHex())
	require.NoError(t, err)
	asked := func(p faultstack.Part) bool { return p.Type == faultstack.PartApprovalRequest }
	tr, err := f.c.Follow(ctx, sessionID, receipt.OutputSeq, faultstack.FollowOptions{Until: asked, WatchSession: true})
	require.NoError(t, err, "read the reply (parts so far %v)", tr.Types())
	if !tr.Done {
		view, err := f.c.WaitSession(ctx, sessionID, "the pending approval", func(v faultstack.SessionView) bool { return v.PendingInteraction != nil })
		require.NoError(t, err)
		decision := faultstack.DecisionApprove
		if !wantApproval {
			t.Errorf("the program asked for an approval it should not need")
			decision = faultstack.DecisionDeny
		}
		require.NoError(t, f.c.Answer(ctx, sessionID, view.PendingInteraction.InteractionID, decision))
		rest, err := f.c.Follow(ctx, sessionID, tr.Last(), faultstack.FollowOptions{WatchSession: true})
		require.NoError(t, err, "read the rest of the reply (parts so far %v)", rest.Types())
		tr = tr.Append(rest)
	} else if wantApproval {
		t.Errorf("the program ran the command without asking (parts %v)", tr.Types())
	}
	msg, err := f.k.Reply(ctx, tr)
	require.NoError(t, err)
	assert.Equal(t, turn.Reply, faultstack.Text(msg), "the final reply, exactly once (parts %v)", tr.Types())
	tools := msg.PartsOfType("dynamic-tool")
	if assert.Len(t, tools, 1, "one command") {
		assert.Equal(t, "output-available", tools[0]["state"], "the command ran: %v", tools[0])
	}
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
