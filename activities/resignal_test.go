package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/worker/resignal"
	"github.com/astrabox/astrabox/workflows"
)

// TestInputWhoseSignalWasLostIsAnsweredAfterTheSweep writes an input with no signal,
// as the API does when Temporal is down, to a Session whose workflow never started
// (its start failed too): nothing picks the input up until the sweep signals again.
func TestInputWhoseSignalWasLostIsAnsweredAfterTheSweep(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in, _, err := s.st.InsertInput(s.ctx, store.NewInput{SessionID: id, Content: "quick"})
	require.NoError(t, err)
	_, err = s.tc.DescribeWorkflowExecution(s.ctx, workflows.SessionWorkflowID(id), "")
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "no workflow runs for the Session")

	const grace = time.Minute
	clock := time.Now()
	sweeper, err := resignal.New(resignal.Options{
		Store:    s.st,
		Signaler: &api.TemporalSignaler{Client: s.tc, TaskQueue: s.taskQueue},
		Period:   time.Hour, // Sweep is called directly below.
		Grace:    grace,
		Now:      func() time.Time { return clock },
		Logger:   testutil.Logger(t).Named("resignal"),
	})
	require.NoError(t, err)

	sent, err := sweeper.Sweep(s.ctx)
	require.NoError(t, err)
	require.Zero(t, sent, "an input inside its grace period is left to its own signal")

	clock = clock.Add(grace + time.Second)
	sent, err = sweeper.Sweep(s.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sent)

	r := s.waitEnded(id, "resp-"+in.ID)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+in.ID))
	got, err := s.st.GetInputByID(s.ctx, in.ID)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, got.State)

	sent, err = sweeper.Sweep(s.ctx)
	require.NoError(t, err)
	require.Zero(t, sent, "an admitted input is not signalled again")
}
