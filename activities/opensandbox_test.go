package activities_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
	"github.com/astrabox/astrabox/sandbox/opensandbox"
	"github.com/astrabox/astrabox/sandbox/opensandbox/osbfake"
	"github.com/astrabox/astrabox/store"
)

// openSandboxStack is a stack whose RuntimeProfile selects the OpenSandbox
// backend, on the spec-validating fake server whose sandboxes are real local
// boxes running the runner as the image's entry point, with the script agent
// as the image's content.
func openSandboxStack(t *testing.T) (*stack, *osbfake.Fake) {
	binDir, err := buildAgent()
	require.NoError(t, err)
	var fake *osbfake.Fake
	s := newStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"},
		image:   "registry.example.com/astrabox/scriptagent:test",
		remote: func(s *stack) sandbox.Backend {
			const key = "stack-key"
			fake, err = osbfake.New(osbfake.LocalBoxes{Backend: s.backend, Runner: localtest.Runner(t),
				Image: []sandbox.Mount{{Source: binDir, Target: agentMount}}}, key)
			require.NoError(t, err)
			t.Cleanup(func() {
				fake.Close()
				require.Empty(t, fake.Violations(), "every request and response matches the OpenAPI document")
			})
			b, err := opensandbox.New(opensandbox.Options{URL: fake.URL, APIKey: key, RunnerKey: []byte("stack-runner-key-0123456789"),
				Deployment: "stack-" + uniq(), PollInterval: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond,
				Logger: testutil.Logger(t).Named("opensandbox")})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, b.Close()) })
			return b
		},
	})
	return s, fake
}

// TestOpenSandboxBoxLostFailsTheOpenResponseAndTheNextMessageResumesInANewBox:
// a conversation runs on the OpenSandbox backend; when the server loses its box
// in the middle of a response, the response fails as runtime_lost, and the next
// message resumes the same native conversation in a new box.
func TestOpenSandboxBoxLostFailsTheOpenResponseAndTheNextMessageResumesInANewBox(t *testing.T) {
	s, fake := openSandboxStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	first := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+first)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)

	long := s.send(id, "slow:300:100")
	s.eventually("some output", func() bool { return len(s.deltas(id, "resp-"+long)) >= 2 })
	before := s.session(id)
	require.True(t, fake.Vanish(*before.SandboxID), "the Session's box is an OpenSandbox sandbox")

	r = s.waitEnded(id, "resp-"+long)
	require.Equal(t, store.OutcomeFailed, *r.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *r.NativeReason)

	next := s.send(id, "quick")
	r2 := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID, "a new box")
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same native conversation")
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+next))
	s.requireGaplessLog(id)
	boxes, err := s.remote.List(s.ctx)
	require.NoError(t, err)
	require.Len(t, boxes, 1, "the lost box is gone, the new one serves")
	require.Equal(t, id, boxes[0].Metadata["session_id"])
}
