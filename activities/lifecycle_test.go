package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

func TestIdleReleaseAndTheNextMessageResumesInANewBox(t *testing.T) {
	s := newStack(t)
	s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, IdleRelease: 2 * time.Second})
	id := s.newSession()

	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	before := s.session(id)
	s.eventually("the idle box to be released", func() bool { return s.session(id).RuntimeUnavailable })
	released := s.session(id)
	require.Nil(t, released.SandboxID)
	_, err := s.backend.Get(s.ctx, *before.SandboxID)
	require.Error(t, err, "the box is gone")

	next := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	after := s.session(id)
	require.False(t, after.RuntimeUnavailable)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the conversation resumes")
	s.requireGaplessLog(id)

	// The native log was mirrored out of the first box and restored into the new one,
	// where the program appended its next turn.
	h, err := s.backend.Get(s.ctx, *after.SandboxID)
	require.NoError(t, err)
	defer h.Close()
	data, err := h.ReadFile(s.ctx, scriptengine.TranscriptPath(&engines.RuntimeIdentity{HomeDir: "/workspace/.home"}, *after.EngineSessionKey))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 4, "each input and each completed turn")
	for i, in := range []string{first, first, next, next} {
		require.Contains(t, lines[i], in)
	}
	// The mirror holds the same entries: the restored ones once, then what the new
	// box's program appended, read from where the last read stopped.
	s.eventually("the new turn mirrored", func() bool {
		streams, err := s.st.ListSessionLogStreams(s.ctx, id)
		require.NoError(t, err)
		require.Len(t, streams, 1)
		entries, err := s.st.ListSessionLogEntries(s.ctx, id, streams[0])
		require.NoError(t, err)
		if len(entries) < len(lines) {
			return false
		}
		require.Len(t, entries, len(lines))
		for i, e := range entries {
			require.JSONEq(t, lines[i], string(e.Entry), "entry %d", i+1)
		}
		return true
	})
}

// TestARelayThatHeartbeatsSeldomStopsAtOnce: a Relay heartbeats to Temporal only
// every RelayHeartbeatEvery, and Temporal passes a cancellation on only in a
// heartbeat's reply; the idle release stops the Relay through its worker instead, so
// the box goes at the idle period, not at the Relay's next heartbeat a minute on.
func TestARelayThatHeartbeatsSeldomStopsAtOnce(t *testing.T) {
	s := newStack(t)
	s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, RelayHeartbeatEvery: time.Minute, IdleRelease: 2 * time.Second})
	id := s.newSession()

	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	within, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	s.eventuallyWithin(within, "the idle box released before the Relay's next heartbeat", func() bool { return s.session(id).RuntimeUnavailable })

	next := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	s.requireGaplessLog(id)
}

func TestRefusedInputFailsAndIsReportedOnTheStream(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	ok := s.send(id, "quick")
	s.waitEnded(id, "resp-"+ok) // a Relay holds the lease, so the refusal reaches the stream

	refused := s.send(id, scriptengine.RefusePrefix+"not today")
	s.eventually("the refusal", func() bool {
		in, err := s.st.GetInputByID(s.ctx, refused)
		require.NoError(t, err)
		return in.State == store.InputFailed
	})
	in, err := s.st.GetInputByID(s.ctx, refused)
	require.NoError(t, err)
	require.Equal(t, "SCRIPT_REFUSED", *in.FailureCode)
	s.eventually("a data-input-failed part", func() bool {
		for _, p := range s.parts(id) {
			var f struct {
				Type string `json:"type"`
				Data struct {
					InputID string `json:"input_id"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(p.Frame, &f))
			if f.Type == "data-input-failed" && f.Data.InputID == refused {
				return true
			}
		}
		return false
	})
	s.requireGaplessLog(id)
}

func TestArchiveFailsHeldInputsAndEndsTheWorkflow(t *testing.T) {
	s := newStack(t)
	id := s.newSession()
	// No worker yet: the input stays held in custody.
	held := s.send(id, "quick")
	_, err := s.st.ArchiveSession(s.ctx, id)
	require.NoError(t, err)
	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleArchive})
	s.startWorker("host-a-" + uniq())

	run := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, run.Get(s.ctx, nil))
	in, err := s.st.GetInputByID(s.ctx, held)
	require.NoError(t, err)
	require.Equal(t, store.InputFailed, in.State)
	require.Equal(t, store.InputFailureConversationEnded, *in.FailureCode)
}

func TestApprovalAnsweredAfterTheReaderReconnects(t *testing.T) {
	s := newStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()

	in := s.send(id, "ask")
	interaction := "ask-" + in
	s.eventually("the question", func() bool {
		it, err := s.st.GetInteractionByID(s.ctx, id, interaction)
		return err == nil && it.State == store.InteractionOpen
	})
	s.eventually("WAITING_INPUT", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.State() == store.StateWaitingInput
	})
	stopA()
	s.startWorker("host-b-" + uniq())

	// What the API does: save the answer, then signal.
	_, err := s.st.SaveInteractionAnswer(s.ctx, id, interaction, json.RawMessage(`{"decision":"yes"}`), nil)
	require.NoError(t, err)
	s.signal(id, workflows.SignalInteractionAnswered, workflows.InteractionAnswered{InteractionID: interaction})

	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	it, err := s.st.GetInteractionByID(s.ctx, id, interaction)
	require.NoError(t, err)
	require.Equal(t, store.InteractionAnswered, it.State, "closed on the runtime's receipt")
	require.Equal(t, wantDeltas(3), s.deltas(id, "resp-"+in))
	s.requireGaplessLog(id)
}
