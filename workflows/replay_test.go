package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories in testdata were recorded from dev-server runs of SessionWorkflow (see
// activities.TestRecordedHistoryReplays; ASTRABOX_RECORD_HISTORY=1 re-records). A
// change that makes the workflow decide differently on the same events fails here,
// before it could break a running Session.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			RegisterWorkflows(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// The replay check can fail: a workflow that schedules other work on the same
// history is reported as nondeterministic.
func TestReplayDetectsAChangedWorkflow(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(func(ctx workflow.Context, start SessionStart) error {
		return workflow.Sleep(ctx, 0)
	}, workflow.RegisterOptions{Name: SessionWorkflowName})
	err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "session_lifecycle.json"))
	require.Error(t, err)
}
