package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/activities"
)

const testHostQueue = "astrabox/host/test-1"

// harness is a test environment whose activities are mocks that record their calls.
type harness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	mu    sync.Mutex
	calls []string
	// waiting counts the callbacks registered with at that have not run.
	waiting int
	facts   activities.SessionFacts
	gen     int64
	// relayEnds feeds how each Relay ends; a Relay with nothing queued runs until
	// it is cancelled.
	relayEnds chan relayEnd
	// Overrides of the default mocks, set before run.
	prepare func(context.Context, activities.PrepareRequest) (activities.PrepareResult, error)
	relay   func(context.Context, activities.RelayRequest) (activities.RelayResult, error)
	deliver func(context.Context, activities.RuntimeRef) (activities.DeliverResult, error)
	answer  func(context.Context, activities.AnswerRequest) error
	stop    func(context.Context, activities.StopChildRunRequest) error
	release func(context.Context, activities.ReleaseRequest) (activities.ReleaseResult, error)
	// idle answers CheckIdle (default: idle).
	idle func() bool
	// relays are the Relay activities the workflow started and has not seen end or
	// cancelled, by activity id.
	relays map[string]bool
	// relayIDs are the ids the workflow gave its Relays, in order; relayStops what it
	// asked of StopRelay.
	relayIDs   []string
	relayStops []activities.StopRelayRequest
	// reconciled is what ReconcileLostRuntime returns, unless reconcile is set.
	reconciled activities.ReconcileResult
	reconcile  func(context.Context, activities.ReconcileRequest) (activities.ReconcileResult, error)
	// activate, applyMode and storeMode override the permission-mode mocks.
	activate  func(context.Context, activities.ActivateRequest) (activities.ActivateResult, error)
	applyMode func(context.Context, activities.PermissionModeRequest) error
	storeMode func(context.Context, activities.PermissionModeRequest) error
	// markTerminated overrides MarkTerminated's success.
	markTerminated func() error
}

type relayEnd struct {
	res activities.RelayResult
	err error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	h := &harness{t: t, env: suite.NewTestWorkflowEnvironment(), relayEnds: make(chan relayEnd, 8)}
	h.env.SetTestTimeout(30 * time.Second)
	Register(h.env)
	stub := &activities.Activities{} // only its method names matter: every call is mocked
	stub.RegisterShared(h.env)
	stub.RegisterHost(h.env)
	h.facts = activities.SessionFacts{AgentID: "agent-1", EngineKind: "scripted", Lifecycle: "creating"}
	h.relays = map[string]bool{}
	relayLive := func(info *activity.Info, live bool) {
		if info.ActivityType.Name != "Relay" {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if live {
			h.relays[info.ActivityID] = true
		} else {
			delete(h.relays, info.ActivityID)
		}
	}
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) { relayLive(info, true) })
	h.env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) { relayLive(info, false) })
	h.env.SetOnActivityCanceledListener(func(info *activity.Info) { relayLive(info, false) })
	h.env.OnActivity(act.LoadSession, mock.Anything, mock.Anything).Return(func(context.Context, activities.SessionRef) (activities.SessionFacts, error) {
		h.record("LoadSession")
		return h.facts, nil
	}).Maybe()
	h.env.OnActivity(act.PrepareRuntime, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.PrepareRequest) (activities.PrepareResult, error) {
		if h.prepare != nil {
			return h.prepare(ctx, req)
		}
		h.record("PrepareRuntime:" + string(req.Mode))
		h.mu.Lock()
		defer h.mu.Unlock()
		if req.Mode == activities.PrepareFresh {
			h.gen++
		}
		attach := ""
		if req.Mode == activities.PrepareReconnect {
			attach = "reconnect"
		} else if h.gen > 1 {
			attach = "restore"
		}
		return activities.PrepareResult{
			Placement:  activities.Placement{SandboxID: fmt.Sprintf("box-%d", h.gen), HostTaskQueue: testHostQueue, RuntimeGeneration: h.gen},
			AttachMode: attach, EngineKind: "scripted",
		}, nil
	}).Maybe()
	h.env.OnActivity(act.ActivateRuntime, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.ActivateRequest) (activities.ActivateResult, error) {
		h.record(fmt.Sprintf("ActivateRuntime:%s:%d:%s", req.SandboxID, req.RuntimeGeneration, req.AttachMode))
		if h.activate != nil {
			return h.activate(ctx, req)
		}
		return activities.ActivateResult{HostTaskQueue: testHostQueue}, nil
	}).Maybe()
	h.env.OnActivity(act.Relay, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.RelayRequest) (activities.RelayResult, error) {
		h.mu.Lock()
		h.relayIDs = append(h.relayIDs, req.RelayID)
		h.mu.Unlock()
		if h.relay != nil {
			return h.relay(ctx, req)
		}
		h.record(fmt.Sprintf("Relay:%d", req.RuntimeGeneration))
		select {
		case end := <-h.relayEnds:
			return end.res, end.err
		case <-ctx.Done():
			return activities.RelayResult{}, ctx.Err()
		}
	}).Maybe()
	h.env.OnActivity(act.StopRelay, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.StopRelayRequest) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.relayStops = append(h.relayStops, req)
		return nil
	}).Maybe()
	simple := func(name string) func(context.Context, activities.RuntimeRef) error {
		return func(context.Context, activities.RuntimeRef) error { h.record(name); return nil }
	}
	h.env.OnActivity(act.Deliver, mock.Anything, mock.Anything).Return(func(ctx context.Context, ref activities.RuntimeRef) (activities.DeliverResult, error) {
		if h.deliver != nil {
			return h.deliver(ctx, ref)
		}
		return activities.DeliverResult{}, simple("Deliver")(ctx, ref)
	}).Maybe()
	h.env.OnActivity(act.SetPermissionMode, mock.Anything, mock.Anything).Return(simple("SetPermissionMode")).Maybe()
	h.env.OnActivity(act.ApplyPermissionMode, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.PermissionModeRequest) error {
		h.record(fmt.Sprintf("ApplyPermissionMode:%s:%d", req.PermissionMode, req.RuntimeGeneration))
		if h.applyMode != nil {
			return h.applyMode(ctx, req)
		}
		return nil
	}).Maybe()
	h.env.OnActivity(act.StorePermissionMode, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.PermissionModeRequest) error {
		h.record("StorePermissionMode:" + req.PermissionMode)
		if h.storeMode != nil {
			return h.storeMode(ctx, req)
		}
		return nil
	}).Maybe()
	h.env.OnActivity(act.Interrupt, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.InterruptRequest) error {
		h.record(fmt.Sprintf("Interrupt:%v", req.CancelQueued))
		return nil
	}).Maybe()
	h.env.OnActivity(act.Answer, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.AnswerRequest) error {
		if h.answer != nil {
			return h.answer(ctx, req)
		}
		h.record("Answer:" + req.InteractionID)
		return nil
	}).Maybe()
	h.env.OnActivity(act.StopChildRun, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.StopChildRunRequest) error {
		h.record(fmt.Sprintf("StopChildRun:%s:%d", req.ChildRunID, req.RuntimeGeneration))
		if h.stop != nil {
			return h.stop(ctx, req)
		}
		return nil
	}).Maybe()
	h.env.OnActivity(act.Disconnect, mock.Anything, mock.Anything).Return(func(context.Context, activities.SessionRef) error {
		h.record("Disconnect")
		return nil
	}).Maybe()
	h.env.OnActivity(act.Release, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.ReleaseRequest) (activities.ReleaseResult, error) {
		h.record("Release:" + req.SandboxID)
		if h.release != nil {
			return h.release(ctx, req)
		}
		return activities.ReleaseResult{}, nil
	}).Maybe()
	h.env.OnActivity(act.ReconcileLostRuntime, mock.Anything, mock.Anything).Return(func(ctx context.Context, req activities.ReconcileRequest) (activities.ReconcileResult, error) {
		h.record("ReconcileLostRuntime")
		if h.reconcile != nil {
			return h.reconcile(ctx, req)
		}
		return h.reconciled, nil
	}).Maybe()
	h.env.OnActivity(act.CheckIdle, mock.Anything, mock.Anything).Return(func(context.Context, activities.SessionRef) (activities.IdleResult, error) {
		if h.relaysLive() > 0 {
			h.record("CheckIdle:relay-running")
		} else {
			h.record("CheckIdle:relay-stopped")
		}
		if h.idle != nil {
			return activities.IdleResult{Idle: h.idle()}, nil
		}
		return activities.IdleResult{Idle: true}, nil
	}).Maybe()
	h.env.OnActivity(act.EndConversation, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.EndRequest) (activities.EndResult, error) {
		h.record(fmt.Sprintf("EndConversation:delete=%v", req.Delete))
		return activities.EndResult{}, nil
	}).Maybe()
	h.env.OnActivity(act.MarkTerminated, mock.Anything, mock.Anything).Return(func(context.Context, activities.SessionRef) error {
		h.record("MarkTerminated")
		if h.markTerminated != nil {
			return h.markTerminated()
		}
		return nil
	}).Maybe()
	h.env.OnActivity(act.RefuseHeldInputs, mock.Anything, mock.Anything).Return(func(_ context.Context, req activities.RefuseRequest) ([]string, error) {
		h.record("RefuseHeldInputs:" + req.Reason)
		return nil, nil
	}).Maybe()
	return h
}

// releasedHarness is a harness for the run a released Session's next signal or update
// starts: the run that released its box (box-1, runtime generation 1) has ended, and
// the Session's row says its runtime is unavailable.
func releasedHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.gen = 1
	h.facts.Lifecycle = "active"
	h.facts.RuntimeUnavailable = true
	h.facts.Placement = activities.Placement{RuntimeGeneration: 1}
	return h
}

// terminatedHarness is a harness for the run a terminated Session's next signal or
// update starts: the run that terminated its runtime (generation 1) recorded it and
// ended.
func terminatedHarness(t *testing.T) *harness {
	t.Helper()
	h := releasedHarness(t)
	h.facts.Lifecycle = "terminated"
	return h
}

// recoveredHarness is a harness for the run a terminated Session's recovery starts:
// the recovery moved it to CREATING, and it has no runtime.
func recoveredHarness(t *testing.T) *harness {
	t.Helper()
	h := releasedHarness(t)
	h.facts.Lifecycle = "creating"
	return h
}

func (h *harness) record(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

// relaysLive counts the Relays the workflow started and has not seen end.
func (h *harness) relaysLive() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.relays)
}

func (h *harness) recorded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// at runs fn at d of workflow time. run fails the test when the workflow ended
// before fn ran: its checks would pass unseen.
func (h *harness) at(d time.Duration, fn func()) {
	h.mu.Lock()
	h.waiting++
	h.mu.Unlock()
	h.env.RegisterDelayedCallback(func() {
		h.mu.Lock()
		h.waiting--
		h.mu.Unlock()
		fn()
	}, d)
}

func (h *harness) signal(name string, v any) func() {
	return func() { h.env.SignalWorkflow(name, v) }
}

func (h *harness) run(start SessionStart) {
	h.env.ExecuteWorkflow(SessionWorkflowName, start)
	require.True(h.t, h.env.IsWorkflowCompleted(), "workflow did not complete")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Zero(h.t, h.waiting, "the workflow ended before every callback the test registered ran")
}

func (h *harness) state() SessionState {
	v, err := h.env.QueryWorkflow(QuerySessionState)
	require.NoError(h.t, err)
	var s SessionState
	require.NoError(h.t, v.Get(&s))
	return s
}

// requireInOrder checks that want appear in calls in this order (others may interleave).
func requireInOrder(t *testing.T, calls []string, want ...string) {
	t.Helper()
	i := 0
	for _, c := range calls {
		if i < len(want) && c == want[i] {
			i++
		}
	}
	require.Equalf(t, len(want), i, "calls %v\nwant in order %v (missing %v)", calls, want, want[min(i, len(want)-1)])
}

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func nonRetryable(typ string) error {
	return temporal.NewNonRetryableApplicationError("test: "+typ, typ, nil)
}

func decodeCarry(t *testing.T, err error) SessionStart {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, SessionWorkflowName, can.WorkflowType.Name)
	var start SessionStart
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &start))
	require.NotNil(t, start.Carry)
	return start
}

func boxName(gen int64) string { return fmt.Sprintf("box-%d", gen) }
