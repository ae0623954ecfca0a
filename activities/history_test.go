package activities_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// recordedHistory is the file in workflows/testdata this test records. Histories
// recorded by earlier code (session_lifecycle.json, before the permission-mode update;
// session_mode_update.json, before one coroutine selected every signal and the Relay
// took new inputs on notice; session_notice_delivery.json, before one idle timer was
// kept across waits; session_idle_timer.json, before a released Session's run ended;
// session_released_run.json, before the run loop read the Relay's future itself;
// session_relay_read_by_loop.json, before each Relay was named and stopped on its
// host) stay there, so the workflows package proves they still replay.
const recordedHistory = "session_relay_stopped_on_host.json"

// TestRecordedHistoryReplays runs a Session on the dev server (inputs, the second one
// left to the Relay delivering on notice, an interrupt, a permission-mode signal and
// update, a release, which ends the run), then replays the run's recorded history
// against the current workflow code. The delete that follows starts a new run. With
// ASTRABOX_RECORD_HISTORY=1 it also saves the history into workflows/testdata, where
// the workflows package replays it on every run.
func TestRecordedHistoryReplays(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	// The next input is then the Relay's to deliver, and the history shows it.
	s.eventually("the Relay to say it delivers on notice", func() bool { return s.workflowState(id).Observed.DeliversOnNotice })
	long := s.send(id, "slow:200:50")
	s.eventually("some output", func() bool { return len(s.deltas(id, "resp-"+long)) >= 1 })
	s.signal(id, workflows.SignalInterrupt, workflows.Interrupt{RequestID: "r-1"})
	s.waitEnded(id, "resp-"+long)
	s.signal(id, workflows.SignalPermissionModeChanged, workflows.PermissionModeChanged{PermissionMode: "default"})
	res, err := s.setMode(id, "default")
	require.NoError(t, err)
	require.True(t, res.Applied, "the live runtime took the mode")
	s.eventually("idle", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.State() == store.StateReady
	})
	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleRelease})
	released := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, released.Get(s.ctx, nil), "the released Session's run ends")
	require.True(t, s.session(id).RuntimeUnavailable)
	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleDelete})
	run := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NotEqual(t, released.GetRunID(), run.GetRunID(), "the delete starts a new run")
	require.NoError(t, run.Get(s.ctx, nil))
	require.Equal(t, store.LifecycleDeleted, s.session(id).Lifecycle)

	// The workflow published its identity and phase as search attributes.
	desc, err := s.tc.DescribeWorkflowExecution(s.ctx, workflows.SessionWorkflowID(id), run.GetRunID())
	require.NoError(t, err)
	attrs := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{
		"AstraboxSessionId": id, "AstraboxAgentId": s.agent.ID,
		"AstraboxSessionState": string(workflows.PhaseDeleted), "AstraboxEngineKind": scriptengine.Kind,
	} {
		require.Contains(t, attrs, name)
		require.Equal(t, `"`+want+`"`, string(attrs[name].GetData()), name)
	}

	data := s.runHistory(id, released.GetRunID())
	if os.Getenv("ASTRABOX_RECORD_HISTORY") == "1" {
		root, err := reporoot.Find()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "workflows", "testdata", recordedHistory), data, 0o644))
	}
	s.requireReplays(data)
}

// runHistory returns one run of the Session's workflow as the history JSON the
// Temporal CLI and UI export.
func (s *stack) runHistory(sessionID, runID string) []byte {
	s.t.Helper()
	var h historypb.History
	it := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(sessionID), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(s.t, err)
		h.Events = append(h.Events, ev)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(s.t, err)
	return data
}

// requireReplays replays a recorded history against the current workflow code.
func (s *stack) requireReplays(history []byte) {
	s.t.Helper()
	replayer := worker.NewWorkflowReplayer()
	workflows.RegisterWorkflows(replayer)
	h, err := client.HistoryFromJSON(bytesReader(history), client.HistoryJSONOptions{})
	require.NoError(s.t, err)
	require.NoError(s.t, replayer.ReplayWorkflowHistory(nil, h))
}
