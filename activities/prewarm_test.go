package activities_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// readyPoolBox is the id of the one box waiting in the profile's prewarm pool.
func (s *stack) readyPoolBox() string {
	s.t.Helper()
	require.NoError(s.t, s.backend.Pool().WaitReady(s.ctx, s.agent.RuntimeProfileID, 1))
	boxes, err := s.backend.List(s.ctx)
	require.NoError(s.t, err)
	for _, b := range boxes {
		if s.backend.Pool().Holds(b.ID) {
			return b.ID
		}
	}
	s.t.Fatal("no box waits in the pool")
	return ""
}

// TestAProfileSavedAfterTheWorkerStartedIsPrewarmed: a RuntimeProfile that asks for
// prewarmed boxes after the worker (and its backend's pools) started gets its pool
// from its first Session on, and the next Session claims a box made before it asked.
func TestAProfileSavedAfterTheWorkerStartedIsPrewarmed(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	size := 1
	_, err := s.st.UpdateRuntimeProfile(s.ctx, s.agent.RuntimeProfileID, store.RuntimeProfileUpdate{PrewarmSize: &size})
	require.NoError(t, err)

	first := s.newSession()
	s.waitEnded(first, "resp-"+s.send(first, "quick"))
	warm := s.readyPoolBox()

	second := s.newSession()
	s.waitEnded(second, "resp-"+s.send(second, "quick"))
	require.Equal(t, warm, *s.session(second).SandboxID, "the second Session claimed the prewarmed box")
}
