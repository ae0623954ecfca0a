package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/opensandbox/osbfake"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// waitFor polls cond until it holds or the test's context ends: the fake's
// clock (expiry, state changes) has no event to wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestCreateTimeout: a box that stays Pending fails Create within the ready
// timeout, and the backend deletes it rather than leave it to start later.
func TestCreateTimeout(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.KeepPending(-1)
	opts := testOptions(t, f)
	opts.ReadyTimeout = 500 * time.Millisecond
	b := newBackend(t, opts)
	start := time.Now()
	_, err := b.Create(testContext(t), testSpec())
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), `state "Pending"`)
	require.Less(t, time.Since(start), 5*time.Second, "the wait is bounded")
	require.Equal(t, 0, f.Count(), "the box that never started is deleted")
	require.Equal(t, 1, f.Calls(osbfake.DeleteSandbox))
}

// TestBoxVanishesMidStream: the server loses the box while the platform
// follows a process's output: the stream fails with ErrBoxLost, Watch reports
// the death, further calls are ErrBoxLost and Get is ErrNotFound, the path on
// which the platform ends the runtime as lost.
func TestBoxVanishesMidStream(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	b := newBackend(t, testOptions(t, f))
	ctx := testContext(t)
	h, err := b.Create(ctx, testSpec())
	require.NoError(t, err)
	defer h.Close()
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	_, err = h.WriteStdin(ctx, "agent", "w1", []byte("first\n"))
	require.NoError(t, err)
	out, err := h.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	defer out.Close()
	l, err := out.Next()
	require.NoError(t, err)
	require.Equal(t, "first", string(l.Data))

	require.True(t, f.Vanish(h.ID()))
	_, err = out.Next()
	require.ErrorIs(t, err, sandbox.ErrBoxLost, "the open stream says the box is lost")
	d := <-deaths
	require.Equal(t, "vanished", d.Reason)
	require.Equal(t, h.ID(), d.BoxID)
	_, err = h.WriteStdin(ctx, "agent", "w2", []byte("late\n"))
	require.ErrorIs(t, err, sandbox.ErrBoxLost)
	_, err = b.Get(ctx, h.ID())
	require.ErrorIs(t, err, sandbox.ErrNotFound)
	info, err := h.Info(ctx)
	require.NoError(t, err)
	require.NotNil(t, info.Death)
	require.NoError(t, b.Destroy(ctx, h.ID()), "destroying a vanished box is not an error")
}

// TestExpiringBoxIsRenewed: under a server's default time-to-live, the
// backend renews the expiry of the boxes it holds, so a box outlives the
// expiry it was created with.
func TestExpiringBoxIsRenewed(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.SetDefaultTTL(1500 * time.Millisecond)
	opts := testOptions(t, f)
	opts.RenewBefore, opts.RenewFor = time.Second, 2*time.Second
	b := newBackend(t, opts)
	ctx := testContext(t)
	created := time.Now()
	h, err := b.Create(ctx, testSpec())
	require.NoError(t, err)
	defer b.Destroy(ctx, h.ID())
	deaths, err := b.Watch(ctx, h.ID())
	require.NoError(t, err)
	waitFor(t, "two renewals past the first expiry", func() bool {
		return f.Calls(osbfake.RenewExpiration) >= 2 && time.Since(created) > 2*time.Second
	})
	select {
	case d := <-deaths:
		t.Fatalf("the box died: %+v", d)
	default:
	}
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/echo", "alive"}})
	require.NoError(t, err)
	require.Equal(t, "alive\n", string(res.Stdout))

	// Without renewal (the worker stopped; an API process only watches) the
	// server expires the box, which Watch reports as such.
	require.NoError(t, b.Close())
	watcher := newBackend(t, Options{URL: opts.URL, APIKey: opts.APIKey, RunnerKey: opts.RunnerKey, Deployment: opts.Deployment,
		PollInterval: opts.PollInterval, NoRenewal: true, Logger: opts.Logger})
	deaths, err = watcher.Watch(ctx, h.ID())
	require.NoError(t, err)
	d := <-deaths
	require.Equal(t, "expired", d.Reason, d.Message)
}

// TestUnauthorized: a refused key is reported as such at once, without
// retries, and nothing is created.
func TestUnauthorized(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	opts := testOptions(t, f)
	opts.APIKey = "wrong-key"
	b := newBackend(t, opts)
	_, err := b.Create(testContext(t), testSpec())
	require.ErrorIs(t, err, ErrUnauthorized)
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusUnauthorized, apiErr.Status)
	require.NotEmpty(t, apiErr.RequestID)
	require.Equal(t, 1, f.Calls(osbfake.CreateSandbox), "a 401 is not retried")
	require.Equal(t, 0, f.Count())
}

// TestRetriesOn429And5xx: answers 429 and 503 are retried with backoff
// (honouring Retry-After) until the request succeeds, and give up after the
// configured attempts.
func TestRetriesOn429And5xx(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	opts := testOptions(t, f)
	opts.Attempts = 4
	b := newBackend(t, opts)
	ctx := testContext(t)
	f.FailNext(osbfake.CreateSandbox, http.StatusTooManyRequests, 2, 1)
	f.FailNext(osbfake.GetSandbox, http.StatusServiceUnavailable, 1, 0)
	start := time.Now()
	h, err := b.Create(ctx, testSpec())
	require.NoError(t, err)
	defer b.Destroy(ctx, h.ID())
	require.Equal(t, 3, f.Calls(osbfake.CreateSandbox), "two refusals, then the create")
	require.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After: 1 was honoured")
	require.Equal(t, 1, f.Count(), "retried creates made one box")

	f.FailNext(osbfake.PauseSandbox, http.StatusBadGateway, 10, 0)
	err = b.Pause(ctx, h.ID())
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr), "got %v", err)
	require.Equal(t, http.StatusBadGateway, apiErr.Status)
	require.Equal(t, 4, f.Calls(osbfake.PauseSandbox), "given up after the configured attempts")
}

// TestRunnerTokenStaysWithTheRunner: the runner refuses requests without the
// box's token, and no process in the box sees the token: not in its
// environment, and not in the runner's, which belongs to another account.
func TestRunnerTokenStaysWithTheRunner(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	b := newBackend(t, testOptions(t, f))
	ctx := testContext(t)
	h, err := b.Create(ctx, testSpec())
	require.NoError(t, err)
	defer b.Destroy(ctx, h.ID())
	res, err := h.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "env; id -u; cat /proc/$PPID/environ"}})
	require.NoError(t, err)
	require.NotContains(t, string(res.Stdout), runnerapi.EnvPrefix)
	require.Contains(t, string(res.Stdout), fmt.Sprintf("%d\n", programUID))
	require.Contains(t, string(res.Stderr), "Permission denied", "the runner's environment is not the program's to read")
	require.NotEqual(t, 0, res.ExitCode)

	ep, err := b.api.endpoint(ctx, h.ID(), b.opts.RunnerPort, false)
	require.NoError(t, err)
	for _, token := range []string{"", "not-the-token"} {
		c := runnerapi.NewHTTPClient("http://"+ep.Endpoint, token, nil)
		_, err := c.Info(ctx)
		require.Error(t, err)
		require.Contains(t, err.Error(), "401")
		c.Close()
	}
}

// TestWorkerRestartFindsItsBoxes: a new backend (a restarted worker) with the
// same deployment and runner key lists the boxes, reconnects to their runners
// and reaps the ones no Session holds; another deployment's boxes are not its.
func TestWorkerRestartFindsItsBoxes(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	opts := testOptions(t, f)
	first := newBackend(t, opts)
	ctx := testContext(t)
	held, err := first.Create(ctx, testSpec())
	require.NoError(t, err)
	orphan, err := first.Create(ctx, testSpec())
	require.NoError(t, err)
	_, err = held.StartProcess(ctx, sandbox.ProcessSpec{ID: "agent", Argv: []string{"/bin/cat"}})
	require.NoError(t, err)
	_, err = held.WriteStdin(ctx, "agent", "w1", []byte("before restart\n"))
	require.NoError(t, err)
	require.NoError(t, first.Close())

	otherOpts := testOptions(t, f)
	other := newBackend(t, otherOpts)
	stranger, err := other.Create(ctx, testSpec())
	require.NoError(t, err)
	defer other.Destroy(ctx, stranger.ID())

	second := newBackend(t, opts)
	listed, err := second.List(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 2, "only this deployment's boxes")
	_, err = second.Get(ctx, stranger.ID())
	require.ErrorIs(t, err, sandbox.ErrNotFound)
	reaped, err := second.Reap(ctx, func(id string) bool { return id == held.ID() })
	require.NoError(t, err)
	require.Equal(t, []string{orphan.ID()}, reaped)
	h, err := second.Get(ctx, held.ID())
	require.NoError(t, err)
	defer second.Destroy(ctx, h.ID())
	_, err = h.WriteStdin(ctx, "agent", "w1", []byte("before restart\n"))
	require.NoError(t, err)
	_, err = h.WriteStdin(ctx, "agent", "w2", []byte("after restart\n"))
	require.NoError(t, err)
	out, err := h.ReadOutput(ctx, "agent", 0, true)
	require.NoError(t, err)
	defer out.Close()
	for _, want := range []string{"before restart", "after restart"} {
		l, err := out.Next()
		require.NoError(t, err)
		require.Equal(t, want, string(l.Data))
	}
}

// TestSpecsARemoteBoxCannotHaveAreRefused: what a remote box cannot be given
// is refused before anything is created, naming why.
func TestSpecsARemoteBoxCannotHaveAreRefused(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	b := newBackend(t, testOptions(t, f))
	ctx := testContext(t)
	for _, tc := range []struct {
		spec sandbox.Spec
		want string
	}{
		{sandbox.Spec{Image: sandbox.Image{Root: "/srv/images/claude"}}, "image reference"},
		{sandbox.Spec{Image: sandbox.Image{URI: image}, Mounts: []sandbox.Mount{{Source: "/opt/x", Target: "/opt/x"}}}, "host mounts"},
		{sandbox.Spec{Image: sandbox.Image{URI: image}, Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: 4000}}}}, "egress"},
		{sandbox.Spec{Image: sandbox.Image{URI: image}, Limits: sandbox.Limits{Pids: 100}}, "pids"},
		{sandbox.Spec{Image: sandbox.Image{URI: image}, Env: map[string]string{runnerapi.EnvToken: "x"}}, "reserved"},
	} {
		_, err := b.Create(ctx, tc.spec)
		require.ErrorIs(t, err, sandbox.ErrInvalidSpec)
		require.Contains(t, err.Error(), tc.want)
	}
	require.Equal(t, 0, f.Calls(osbfake.CreateSandbox))
}
