package activities_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
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

// TestATerminatedSessionsRunEndsAndItsRecoveryStartsTheNext: once PostgreSQL records
// a Session TERMINATED its workflow run ends, holding no worker's cache; the recovery
// (the API's write, then its SignalWithStart) starts a new run, which brings up a box
// that answers the next message.
func TestATerminatedSessionsRunEndsAndItsRecoveryStartsTheNext(t *testing.T) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	var cured atomic.Bool
	s := newStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: needsMore{Adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"}, extra: "astrabox-absent-" + uniq(), cured: &cured},
		mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
	})
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	s.send(id, "quick")
	terminated := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, terminated.Get(s.ctx, nil), "the terminated Session's run ends")
	require.Equal(t, store.LifecycleTerminated, s.session(id).Lifecycle)
	s.requireReplays(s.runHistory(id, terminated.GetRunID()))

	cured.Store(true)
	_, err = s.st.RecoverSession(s.ctx, id)
	require.NoError(t, err)
	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleRecover})
	recovered := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NotEqual(t, terminated.GetRunID(), recovered.GetRunID(), "the recovery starts a new run")
	s.eventually("the recovered runtime", func() bool { return s.session(id).Lifecycle == store.LifecycleActive })

	in := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	s.requireGaplessLog(id)
	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleDelete})
	require.NoError(t, recovered.Get(s.ctx, nil))
	s.requireReplays(s.runHistory(id, recovered.GetRunID()))
}
