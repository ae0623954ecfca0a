package api

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/astrabox/astrabox/store/pubsub"
	"github.com/astrabox/astrabox/workflows"
)

// SessionSignaler hands work to a Session's workflow. Handlers write the row first and
// signal afterwards: the workflow re-reads PostgreSQL, so a lost or repeated signal
// does no harm and the row is the truth. The permission mode is the exception: the
// program may refuse it, so the workflow answers it as an update before anything is
// stored.
type SessionSignaler interface {
	// StartSession starts the Session's workflow, or does nothing when it runs.
	StartSession(ctx context.Context, sessionID string) error
	// SignalSession delivers signalName with payload, starting the workflow first when
	// it is not running.
	SignalSession(ctx context.Context, sessionID, signalName string, payload any) error
	// SetPermissionMode asks the workflow to set the Session's permission mode and
	// waits for its answer (workflows.UpdateSetPermissionMode), starting the workflow
	// first when it is not running. Nothing is written before: the workflow stores the
	// mode once a live program accepted it, or for the next one. A refusal is a
	// temporal.ApplicationError of type workflows.ErrPermissionModeRefused.
	SetPermissionMode(ctx context.Context, sessionID, mode string) (workflows.PermissionModeSet, error)
}

// OutputSubscriber subscribes to PostgreSQL notifications (store/pubsub.Listener).
type OutputSubscriber interface {
	Subscribe(ctx context.Context, channel string) (*pubsub.Subscription, error)
}

var _ OutputSubscriber = (*pubsub.Listener)(nil)

// TemporalSignaler is the SessionSignaler over a Temporal client: signals go to the
// workflow id session/<session_id>, and one to a Session whose workflow is not running
// starts it on the shared task queue (SignalWithStart).
type TemporalSignaler struct {
	Client    client.Client
	TaskQueue string
	// Describe, when set, names a Session for operators: the Temporal UI shows it as the
	// summary of the workflow a call starts. A failed lookup starts it without one.
	Describe func(ctx context.Context, sessionID string) (string, error)
}

var _ SessionSignaler = (*TemporalSignaler)(nil)

// startOptions places the workflow, with its workflow task timeout (continue-as-new
// carries it to the next runs) and its summary for operators; SignalWithStart already
// joins a running one.
func (t *TemporalSignaler) startOptions(ctx context.Context, sessionID string) client.StartWorkflowOptions {
	opts := client.StartWorkflowOptions{
		ID: workflows.SessionWorkflowID(sessionID), TaskQueue: t.TaskQueue, WorkflowTaskTimeout: workflows.TaskTimeout,
	}
	if t.Describe != nil {
		if summary, err := t.Describe(ctx, sessionID); err == nil {
			opts.StaticSummary = summary
		}
	}
	return opts
}

// StartSession starts the Session's workflow; a running one is kept.
func (t *TemporalSignaler) StartSession(ctx context.Context, sessionID string) error {
	opts := t.startOptions(ctx, sessionID)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	_, err := t.Client.ExecuteWorkflow(ctx, opts, workflows.SessionWorkflowName, workflows.SessionStart{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("start workflow of session %s: %w", sessionID, err)
	}
	return nil
}

// SignalSession signals the Session's workflow, starting it when needed. The workflow
// is nearly always running, so the signal goes first on its own and SignalWithStart
// only when it is not: SignalWithStart's options name the Session for operators, a
// statement on PostgreSQL that every input paid for a summary only a start uses.
func (t *TemporalSignaler) SignalSession(ctx context.Context, sessionID, signalName string, payload any) error {
	err := t.Client.SignalWorkflow(ctx, workflows.SessionWorkflowID(sessionID), "", signalName, payload)
	var notRunning *serviceerror.NotFound
	if !errors.As(err, &notRunning) {
		if err != nil {
			return fmt.Errorf("signal %s to session %s: %w", signalName, sessionID, err)
		}
		return nil
	}
	_, err = t.Client.SignalWithStartWorkflow(ctx, workflows.SessionWorkflowID(sessionID), signalName, payload,
		t.startOptions(ctx, sessionID), workflows.SessionWorkflowName, workflows.SessionStart{SessionID: sessionID})
	if err != nil {
		return fmt.Errorf("signal %s to session %s: %w", signalName, sessionID, err)
	}
	return nil
}

// modeUpdateAttempts bounds the permission-mode update's attempts against runs that
// end as it arrives.
const modeUpdateAttempts = 3

// SetPermissionMode runs the permission-mode update with UpdateWithStart, so a Session
// whose workflow is not running gets one, and waits for the update to complete. A
// released Session's run ends once nothing is asked of it: an update that reaches it
// as it ends is aborted before the workflow saw it (NotFound, "aborted by closing
// workflow"), and is sent again, to start the next run.
func (t *TemporalSignaler) SetPermissionMode(ctx context.Context, sessionID, mode string) (workflows.PermissionModeSet, error) {
	var notFound *serviceerror.NotFound
	for attempt := 1; ; attempt++ {
		res, err := t.setPermissionModeOnce(ctx, sessionID, mode)
		if err == nil || attempt == modeUpdateAttempts || !errors.As(err, &notFound) || ctx.Err() != nil {
			return res, err
		}
	}
}

func (t *TemporalSignaler) setPermissionModeOnce(ctx context.Context, sessionID, mode string) (workflows.PermissionModeSet, error) {
	opts := t.startOptions(ctx, sessionID)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	start := t.Client.NewWithStartWorkflowOperation(opts, workflows.SessionWorkflowName, workflows.SessionStart{SessionID: sessionID})
	handle, err := t.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   workflows.UpdateSetPermissionMode,
			Args:         []any{workflows.SetPermissionMode{PermissionMode: mode}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.PermissionModeSet{}, fmt.Errorf("set permission mode of session %s: %w", sessionID, err)
	}
	var res workflows.PermissionModeSet
	if err := handle.Get(ctx, &res); err != nil {
		return workflows.PermissionModeSet{}, fmt.Errorf("set permission mode of session %s: %w", sessionID, err)
	}
	return res, nil
}
