package activities_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// These tests run the real SessionWorkflow on a Temporal dev server, with real
// PostgreSQL and real local boxes, against the scripted test engine (scriptengine).
// The same scenarios run against the real Claude Code in claude_test.go and
// claude_stack_test.go.

func wantDeltas(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("part-%d ", i+1)
	}
	return out
}

func TestTwoInputsInOneConversationOneSentWhileWorking(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	first := s.send(id, "slow:6:100")
	s.eventually("the first response to start", func() bool { _, ok := s.response(id, "resp-"+first); return ok })
	second := s.send(id, "quick") // the program is working: it queues this one

	r1 := s.waitEnded(id, "resp-"+first)
	r2 := s.waitEnded(id, "resp-"+second)
	require.Equal(t, store.OutcomeCompleted, *r1.Outcome)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	require.Less(t, *r1.EndedSeq, r2.StartedSeq, "answered in accepted order")
	require.Equal(t, wantDeltas(6), s.deltas(id, "resp-"+first))
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+second))
	s.requireGaplessLog(id)

	for _, in := range []string{first, second} {
		got, err := s.st.GetInputByID(s.ctx, in)
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, got.State)
	}
	s.eventually("the program to report idle", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.State() == store.StateReady
	})
}

func TestInterruptStopsTheResponseAndTheSessionStaysUsable(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	long := s.send(id, "slow:200:100")
	s.eventually("some output", func() bool { return len(s.deltas(id, "resp-"+long)) >= 2 })
	s.signal(id, workflows.SignalInterrupt, workflows.Interrupt{RequestID: "r-" + uniq()})
	r := s.waitEnded(id, "resp-"+long)
	require.Equal(t, store.OutcomeCancelled, *r.Outcome)
	require.Equal(t, "interrupted", *r.NativeReason, "the program's own word")
	require.Less(t, len(s.deltas(id, "resp-"+long)), 200)

	next := s.send(id, "quick")
	r2 := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	s.requireGaplessLog(id)
}

func TestWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	s := newStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()

	const n = 60
	in := s.send(id, fmt.Sprintf("slow:%d:100", n))
	s.eventually("streaming to be under way", func() bool { return len(s.deltas(id, "resp-"+in)) >= 5 })
	hostA := *s.session(id).HostTaskQueue
	stopA() // the process holding the connection goes away mid-response
	seen := len(s.deltas(id, "resp-"+in))
	require.Less(t, seen, n, "the response was still streaming")

	s.startWorker("host-b-" + uniq())
	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	require.Equal(t, wantDeltas(n), s.deltas(id, "resp-"+in), "no repeated and no missing part")
	s.requireGaplessLog(id)
	sess := s.session(id)
	require.NotEqual(t, hostA, *sess.HostTaskQueue, "another worker holds the connection now")
	require.Equal(t, int64(1), sess.RuntimeGeneration, "the same box and runtime: a lost connection is not a lost box")
}

// TestARelayWhoseLeaseIsTakenEndsAndTheSessionGoesOn: a reader lease taken from an
// idle Session's Relay (as a new reader takes it) is noticed at the worker's next
// renewal of its Relays' leases; that Relay ends, the workflow reconnects with a
// Relay of its own, and the next message is answered once, in the same box.
func TestARelayWhoseLeaseIsTakenEndsAndTheSessionGoesOn(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	held, err := s.st.GetReaderLeaseBySession(s.ctx, id)
	require.NoError(t, err)

	taken, err := s.st.AcquireReaderLease(s.ctx, store.LeaseRequest{SessionID: id, Holder: "intruder", TTL: time.Hour, Steal: true})
	require.NoError(t, err)
	require.Greater(t, taken.Generation, held.Generation)
	s.eventually("a Relay of the worker to hold the lease again", func() bool {
		l, err := s.st.GetReaderLeaseBySession(s.ctx, id)
		require.NoError(t, err)
		return l.Generation > taken.Generation && l.Holder != "intruder"
	})

	next := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+next))
	s.requireGaplessLog(id)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the same box and runtime")
}

func TestRemovedBoxFailsTheOpenResponseAndTheNextMessageResumesInANewBox(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	long := s.send(id, "slow:300:100")
	s.eventually("some output", func() bool { return len(s.deltas(id, "resp-"+long)) >= 2 })
	before := s.session(id)
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))

	r := s.waitEnded(id, "resp-"+long)
	require.Equal(t, store.OutcomeFailed, *r.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *r.NativeReason)
	// The stream ends: the last part of the response is its finish part.
	parts := s.parts(id)
	require.JSONEq(t, `"finish"`, jsonField(t, parts[len(parts)-1].Frame, "type"))

	next := s.send(id, "quick")
	r2 := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID, "a new box")
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same native conversation")
	require.Greater(t, after.RuntimeGeneration, before.RuntimeGeneration)
	got, err := s.st.GetInputByID(s.ctx, long)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, got.State, "an admitted input is not sent again")
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+next))
	s.requireGaplessLog(id)
}

func jsonField(t *testing.T, frame []byte, key string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, jsonUnmarshal(frame, &m))
	return fmt.Sprintf("%q", m[key])
}
