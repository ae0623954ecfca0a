package api

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/internal/logging"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/workflows"
)

// receivedInput is what the stand-in Session workflow saw.
type receivedInput struct {
	SessionID string
	InputID   string
}

// standInSessionWorkflow is registered under the Session workflow's name for this test
// only: it returns the first input-accepted signal it receives.
func standInSessionWorkflow(ctx workflow.Context, start workflows.SessionStart) (receivedInput, error) {
	var in workflows.InputAccepted
	workflow.GetSignalChannel(ctx, workflows.SignalInputAccepted).Receive(ctx, &in)
	return receivedInput{SessionID: start.SessionID, InputID: in.InputID}, nil
}

// TestSignalsReachTheSessionWorkflow runs the API against a real Temporal dev server:
// creating a Session starts the workflow session/<id>, and an accepted input signals
// that same execution.
func TestSignalsReachTheSessionWorkflow(t *testing.T) {
	t.Parallel()
	dev := testutil.TemporalDevServer(t)
	c, err := client.Dial(client.Options{HostPort: dev.FrontendHostPort(), Logger: logging.NewTemporal(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := "api-test-" + uuid.NewString()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(standInSessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	signaler := &TemporalSignaler{Client: c, TaskQueue: queue}
	f := newFixture(t, func(o *Options) { o.Signaler = signaler })
	id := f.newSession(f.member)
	// Starting again (a repeated Idempotency-Key does) keeps the running workflow.
	require.NoError(t, signaler.StartSession(f.ctx, id))
	var receipt inputReceipt
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "hello", "client_message_id": "m-1"}).ok(t).into(t, &receipt)

	run := c.GetWorkflow(f.ctx, workflows.SessionWorkflowID(id), "")
	var got receivedInput
	require.NoError(t, run.Get(f.ctx, &got))
	assert.Equal(t, receivedInput{SessionID: id, InputID: receipt.InputID}, got)

	desc, err := c.DescribeWorkflowExecution(f.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, err)
	assert.Equal(t, workflows.SessionWorkflowName, desc.WorkflowExecutionInfo.Type.Name)
	assert.Equal(t, queue, desc.WorkflowExecutionInfo.TaskQueue)
}
