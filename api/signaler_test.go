package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
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
	signaler.Describe = f.st.OperatorSummary
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
	assert.Equal(t, workflows.TaskTimeout, desc.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration())
	// Operators read whose Session it is in the Temporal UI: its Agent and owner.
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	sess, err := f.st.GetSessionByID(f.ctx, id)
	require.NoError(t, err)
	agent, err := f.st.GetAgentByID(f.ctx, sess.AgentID)
	require.NoError(t, err)
	assert.Equal(t, "Session of Agent "+agent.Name+" · owner "+sess.UserID, summary)

	// The stand-in ended with the first input: the next one starts a new run, named
	// for operators as the first was.
	first := run.GetRunID()
	f.call("POST", "/api/v1/sessions/"+id+"/inputs", f.member, map[string]any{"content": "again", "client_message_id": "m-2"}).ok(t).into(t, &receipt)
	// The signal follows the receipt, so the new run may not be there yet.
	require.Eventually(t, func() bool {
		run = c.GetWorkflow(f.ctx, workflows.SessionWorkflowID(id), "")
		return run.GetRunID() != first
	}, 30*time.Second, 20*time.Millisecond, "a new run starts")
	require.NoError(t, run.Get(f.ctx, &got))
	assert.Equal(t, receivedInput{SessionID: id, InputID: receipt.InputID}, got, "a signal to an ended workflow starts it again")
	desc, err = c.DescribeWorkflowExecution(f.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, err)
	assert.Equal(t, workflows.TaskTimeout, desc.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration(), "a start by SignalWithStart")
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	assert.Equal(t, "Session of Agent "+agent.Name+" · owner "+sess.UserID, summary)
}

// standInModeWorkflow is registered under the Session workflow's name for one test: it
// answers the permission-mode update as the real one does, refusing bypassPermissions
// in the program's words, until a lifecycle signal ends it.
func standInModeWorkflow(ctx workflow.Context, _ workflows.SessionStart) error {
	err := workflow.SetUpdateHandler(ctx, workflows.UpdateSetPermissionMode, func(_ workflow.Context, req workflows.SetPermissionMode) (workflows.PermissionModeSet, error) {
		if req.PermissionMode == "bypassPermissions" {
			return workflows.PermissionModeSet{}, temporal.NewNonRetryableApplicationError(standInRefusal, workflows.ErrPermissionModeRefused, nil)
		}
		return workflows.PermissionModeSet{Applied: true}, nil
	})
	if err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, workflows.SignalLifecycle).Receive(ctx, nil)
	return nil
}

const standInRefusal = "Cannot set permission mode to bypassPermissions because the session was not launched with --dangerously-skip-permissions"

// TestPermissionModeUpdateStartsTheWorkflowAndCarriesARefusal runs the update through
// a real Temporal dev server: UpdateWithStart starts a Session's workflow that is not
// running, an accepted mode comes back applied, and a refusal reaches the API as
// PERMISSION_MODE_REFUSED with the program's message.
func TestPermissionModeUpdateStartsTheWorkflowAndCarriesARefusal(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	dev := testutil.TemporalDevServer(t)
	c, err := client.Dial(client.Options{HostPort: dev.FrontendHostPort(), Logger: logging.NewTemporal(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := "api-mode-" + uuid.NewString()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(standInModeWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	signaler := &TemporalSignaler{Client: c, TaskQueue: queue}
	id := uuid.NewString()
	t.Cleanup(func() {
		_ = c.SignalWorkflow(context.Background(), workflows.SessionWorkflowID(id), "", workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleDelete})
	})

	res, err := signaler.SetPermissionMode(ctx, id, "plan")
	require.NoError(t, err, "the first update starts the workflow")
	assert.True(t, res.Applied)
	_, err = signaler.SetPermissionMode(ctx, id, "bypassPermissions")
	require.Error(t, err)
	mapped := permissionModeError(err, "bypassPermissions")
	assert.Equal(t, CodePermissionModeRefused, mapped.Code)
	assert.Equal(t, map[string]any{"permission_mode": "bypassPermissions", "program_message": standInRefusal}, mapped.Data)
	res, err = signaler.SetPermissionMode(ctx, id, "default")
	require.NoError(t, err, "the running workflow takes the next update")
	assert.True(t, res.Applied)

	// An update that reached a run as it ended was aborted unseen: it is sent again. A
	// refusal is the program's answer and is not.
	closing := &closingRunClient{Client: c, aborts: 1}
	signaler.Client = closing
	res, err = signaler.SetPermissionMode(ctx, id, "plan")
	require.NoError(t, err, "the update is sent again after its abort")
	assert.True(t, res.Applied)
	assert.Equal(t, 2, closing.calls)
	closing.calls, closing.aborts = 0, 0
	_, err = signaler.SetPermissionMode(ctx, id, "bypassPermissions")
	assert.Equal(t, CodePermissionModeRefused, permissionModeError(err, "bypassPermissions").Code)
	assert.Equal(t, 1, closing.calls, "a refusal is not sent again")
}

// closingRunClient answers its first aborts UpdateWithStart calls as Temporal answers
// an update that reached a run as it completed, and passes the others on.
type closingRunClient struct {
	client.Client
	aborts, calls int
}

func (c *closingRunClient) UpdateWithStartWorkflow(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.calls++
	if c.calls <= c.aborts {
		return nil, fmt.Errorf("failed workflow update: %w", serviceerror.NewNotFound("workflow update was aborted by closing workflow"))
	}
	return c.Client.UpdateWithStartWorkflow(ctx, opts)
}
