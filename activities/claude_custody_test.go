package activities_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/worker"
	"github.com/astrabox/astrabox/workflows"
)

// activeOn reports whether the Session's runtime is active on the host task queue.
func (s *stack) activeOn(sessionID, hostQueue string) bool {
	sess := s.session(sessionID)
	return sess.Lifecycle == store.LifecycleActive && sess.EngineSessionKey != nil &&
		sess.HostTaskQueue != nil && *sess.HostTaskQueue == hostQueue
}

// TestClaudeCodeSessionWithoutMessagesSurvivesRestartAndNewBox brings a Session's
// runtime up without any message, so Claude Code has written no transcript, then
// restarts the worker and replaces the box. Each bring-up reaches the same Claude
// conversation, and the first message is answered under the key the Session got.
func TestClaudeCodeSessionWithoutMessagesSurvivesRestartAndNewBox(t *testing.T) {
	s := newClaudeStack(t)
	hostA, hostB := "host-a-"+uniq(), "host-b-"+uniq()
	stopA := s.startWorker(hostA)
	id := s.newSession()
	_, err := s.st.SetSessionPermissionMode(s.ctx, id, "default")
	require.NoError(t, err)
	s.signal(id, workflows.SignalPermissionModeChanged, workflows.PermissionModeChanged{PermissionMode: "default"})
	s.eventually("the runtime up without a message", func() bool { return s.activeOn(id, worker.HostTaskQueue(s.taskQueue, hostA)) })
	before := s.session(id)

	// The platform restarts: the box and its Claude Code process live on.
	stopA()
	s.startWorker(hostB)
	s.eventually("the runtime reconnected by the new worker", func() bool { return s.activeOn(id, worker.HostTaskQueue(s.taskQueue, hostB)) })
	reconnected := s.session(id)
	require.Equal(t, *before.SandboxID, *reconnected.SandboxID, "the same box")
	require.Equal(t, *before.EngineSessionKey, *reconnected.EngineSessionKey)

	// The box is replaced; nothing was mirrored because Claude wrote nothing.
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))
	s.eventually("the runtime up in a new box", func() bool {
		sess := s.session(id)
		return sess.SandboxID != nil && *sess.SandboxID != *before.SandboxID && s.activeOn(id, worker.HostTaskQueue(s.taskQueue, hostB))
	})
	require.Equal(t, store.LifecycleActive, s.session(id).Lifecycle, "never terminated")

	hello := s.send(id, "hello at last")
	s.eventually("the first message answered", func() bool { return s.admittedAndIdle(id, hello) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	require.Equal(t, *before.EngineSessionKey, *s.session(id).EngineSessionKey, "the Session's own Claude conversation")
	s.requireGaplessLog(id)
}

// TestClaudeCodeTenMessagesAtOnceAreEachAdmitted sends ten messages at once. Claude
// Code merges the ones that wait in its queue into one transcript user line; each of
// them is admitted from that line, the responses name every input they answer, and
// nothing stays held once the runtime is idle.
func TestClaudeCodeTenMessagesAtOnceAreEachAdmitted(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	var ids []string
	for i := range 10 {
		in, _, err := s.st.InsertInput(s.ctx, store.NewInput{SessionID: id, Content: fmt.Sprintf("message %d of 10", i+1)})
		require.NoError(t, err)
		ids = append(ids, in.ID)
	}
	for _, in := range ids {
		s.signal(id, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: in})
	}

	s.eventually("every message admitted and the Session READY", func() bool {
		held, err := s.st.CountHeldInputs(s.ctx, id)
		require.NoError(t, err)
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return held == 0 && f.State() == store.StateReady
	})
	for _, in := range ids {
		got, err := s.st.GetInputByID(s.ctx, in)
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, got.State, "input %s", in)
	}
	responses, err := s.st.ListResponsesBySession(s.ctx, id)
	require.NoError(t, err)
	answered := map[string]int{}
	merged := false
	for _, r := range responses {
		require.NotNil(t, r.Outcome)
		require.Equal(t, store.OutcomeCompleted, *r.Outcome, "response %s", r.ResponseID)
		var inputs []string
		require.NoError(t, json.Unmarshal(r.InputIDs, &inputs))
		merged = merged || len(inputs) > 1
		for _, in := range inputs {
			answered[in]++
		}
	}
	for _, in := range ids {
		require.Equal(t, 1, answered[in], "one response answers input %s", in)
	}
	require.True(t, merged, "Claude Code answered several messages in one turn (%d responses)", len(responses))
	sess := s.session(id)
	require.NotNil(t, sess.RuntimeStatus)
	require.Equal(t, "idle", *sess.RuntimeStatus)
	s.requireGaplessLog(id)
}
