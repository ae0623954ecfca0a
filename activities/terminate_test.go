package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/store"
)

// TestTerminationSettlesTheRuntimeItTakesOffline: terminating a Session whose program
// is working on an open response (the workflow does so after repeated failures to
// reach it) frees its box and settles its records: the response ends failed with
// runtime_lost, runtime_status is cleared, so the TERMINATED Session is not busy and
// can be archived.
func TestTerminationSettlesTheRuntimeItTakesOffline(t *testing.T) {
	s := newStack(t)
	stop := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	in := s.send(id, "slow:600:1000")
	s.eventually("the program to work on the response", func() bool {
		_, open := s.response(id, "resp-"+in)
		sess := s.session(id)
		return open && sess.RuntimeStatus != nil && *sess.RuntimeStatus == store.RuntimeWorking
	})
	box := *s.session(id).SandboxID
	stop()

	acts, err := activities.New(activities.Deps{
		Store: s.st, Engines: s.engines, Backends: map[string]sandbox.Backend{store.SandboxLocal: s.backend},
		OpenBox:       func(_ context.Context, h sandbox.Handle) (engines.Box, error) { return enginebox.New(h), nil },
		HostTaskQueue: "terminating-" + uniq(),
	})
	require.NoError(t, err)
	require.NoError(t, acts.MarkTerminated(s.ctx, activities.SessionRef{SessionID: id}))

	sess := s.session(id)
	require.Equal(t, store.LifecycleTerminated, sess.Lifecycle)
	require.Nil(t, sess.RuntimeStatus, "no runtime reports any more")
	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeFailed, *r.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *r.NativeReason)
	_, err = s.backend.Get(s.ctx, box)
	require.ErrorIs(t, err, sandbox.ErrNotFound, "the box is freed")
	_, err = s.st.ArchiveSession(s.ctx, id)
	require.NoError(t, err, "a TERMINATED Session is not busy")
	s.requireGaplessLog(id)
}
