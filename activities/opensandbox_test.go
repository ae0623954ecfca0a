package activities_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
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
	s, fake, _ := openSandboxStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"},
		image:   "registry.example.com/astrabox/scriptagent:test",
	}, []sandbox.Mount{{Source: binDir, Target: agentMount}})
	return s, fake
}

// openSandboxStackWith is openSandboxStack for the Agent program of setup,
// whose image holds the folders of image. The OpenSandbox backend's workers
// serve the forwards of setup.egress through their boxes' egress tunnels.
// restart replaces the stack's OpenSandbox backend with a new one on the same
// deployment, as a restarted worker process opens it; workers started after
// use it.
func openSandboxStackWith(t *testing.T, setup engineSetup, image []sandbox.Mount) (s *stack, fake *osbfake.Fake, restart func()) {
	const key = "stack-key"
	var opts opensandbox.Options
	open := func() *opensandbox.Backend {
		b, err := opensandbox.New(opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		return b
	}
	setup.remote = func(s *stack) sandbox.Backend {
		var err error
		fake, err = osbfake.New(osbfake.LocalBoxes{Backend: s.backend, Runner: localtest.Runner(t), Image: image}, key)
		require.NoError(t, err)
		t.Cleanup(func() {
			fake.Close()
			require.Empty(t, fake.Violations(), "every request and response matches the OpenAPI document")
		})
		opts = opensandbox.Options{URL: fake.URL, APIKey: key, RunnerKey: []byte("stack-runner-key-0123456789"),
			Deployment: "stack-" + uniq(), PollInterval: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond,
			Egress: setup.egress, Logger: testutil.Logger(t).Named("opensandbox")}
		return open()
	}
	s = newStackWith(t, setup)
	restart = func() {
		require.NoError(t, s.remote.(*opensandbox.Backend).Close())
		s.remote = open()
	}
	return s, fake, restart
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

// TestOpenSandboxClaudeCodeReachesTheModelThroughTheEgressTunnel: Claude Code
// in a box on the OpenSandbox backend reaches the scripted model on its
// loopback model forward, through the egress tunnel the worker holds to the
// box's runner; the worker adds the credential (the model side sees only the
// real key, the box holds a placeholder). After a worker restart the next
// worker takes the tunnel over and the conversation goes on in the same box.
// The box's loopback is its own, as a container's is: the host holding the
// forward's port changes nothing.
func TestOpenSandboxClaudeCodeReachesTheModelThroughTheEgressTunnel(t *testing.T) {
	if hold, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(activities.ModelForwardPort))); err == nil {
		t.Cleanup(func() { hold.Close() })
	} // else something on the host holds it already
	setup, model := claudeSetup(t)
	var mu sync.Mutex
	keys := map[string]int{}
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get("x-api-key")]++
		mu.Unlock()
		model.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	setup.egress = map[string]egress.Route{activities.ModelForwardName: {Upstream: gate.URL,
		Headers: map[string]string{"x-api-key": "sk-host-side"}}}
	image := setup.mounts
	setup.mounts = nil // the image holds Claude Code: a remote box has no host mounts
	setup.image = "registry.example.com/astrabox/claude:test"
	s, _, restart := openSandboxStackWith(t, setup, image)
	host := "host-a-" + uniq()
	stop := s.startWorker(host)
	id := s.newSession()

	first := s.send(id, "remember the word PINEAPPLE")
	s.eventually("the first answer", func() bool { return s.admittedAndIdle(id, first) && s.answerEnded(id, first) })
	before := s.session(id)
	stop()
	restart() // the worker process's OpenSandbox backend, and its tunnel, end with it
	s.startWorker(host)
	second := s.send(id, "which word?")
	s.eventually("the second answer, after a worker restart", func() bool { return s.admittedAndIdle(id, second) && s.answerEnded(id, second) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	require.True(t, anyContains(model.Requests(), "which word?", "PINEAPPLE"), "the model saw the first message with the second")
	require.Equal(t, *before.SandboxID, *s.session(id).SandboxID, "the same box, reached by the next worker")
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, keys["sk-host-side"])
	require.Len(t, keys, 1, "every model request carried the worker's credential, none the box's placeholder: %v", keys)
	s.requireGaplessLog(id)
}
