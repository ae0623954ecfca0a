package activities_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// TestANewCredentialOwnerReplacesTheRuntimeAtTheNextConnection: a runtime placed with
// one model credential delivery owner is not reattached once the deployment declares
// another: at the next connection the box is replaced, the new owner recorded, and the
// conversation continues in the replacement.
func TestANewCredentialOwnerReplacesTheRuntimeAtTheNextConnection(t *testing.T) {
	s := newStack(t)
	var owner atomic.Value
	owner.Store("tenant-a")
	s.credentialOwner = func(context.Context, store.Agent, store.RuntimeProfile) (string, error) {
		return owner.Load().(string), nil
	}
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	before := s.session(id)
	require.Equal(t, "tenant-a", *before.ModelCredentialOwner)

	owner.Store("tenant-b")
	stopA() // the connection is lost; the next one meets the new owner
	s.startWorker("host-b-" + uniq())
	s.eventually("a replacement runtime", func() bool {
		sess := s.session(id)
		return sess.RuntimeGeneration == before.RuntimeGeneration+1 && sess.HostTaskQueue != nil
	})
	next := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome, "the conversation continues in the replacement")
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, "tenant-b", *after.ModelCredentialOwner)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same conversation")
	_, err := s.backend.Get(s.ctx, *before.SandboxID)
	require.ErrorIs(t, err, sandbox.ErrNotFound, "the old box is released")
	s.requireGaplessLog(id)
}
