package activities_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// searchState is the AstraboxSessionState search attribute of the Session's workflow.
func (s *stack) searchState(sessionID string) string {
	desc, err := s.tc.DescribeWorkflowExecution(s.ctx, workflows.SessionWorkflowID(sessionID), "")
	require.NoError(s.t, err)
	field := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SearchSessionState.GetName()]
	var v string
	if field != nil {
		require.NoError(s.t, converter.GetDefaultDataConverter().FromPayload(field, &v))
	}
	return v
}

// currentDetails are the workflow's current details, as the Temporal UI reads them.
func (s *stack) currentDetails(sessionID string) string {
	res, err := s.tc.QueryWorkflow(s.ctx, workflows.SessionWorkflowID(sessionID), "", "__temporal_workflow_metadata")
	require.NoError(s.t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(s.t, res.Get(&md))
	return md.GetCurrentDetails()
}

// apiState is the Session's state as the API derives it.
func (s *stack) apiState(sessionID string) string {
	f, err := s.st.GetSessionFactsByID(s.ctx, sessionID)
	require.NoError(s.t, err)
	return string(f.State())
}

// TestOperatorsReadTheSessionInTheTemporalUI: the AstraboxSessionState search
// attribute follows the Session's state as the API derives it (PROCESSING while the
// program works, READY once it is idle, TERMINATED), the current details name the
// Agent, owner and title with the state and what is open and held, and every activity
// carries a summary.
func TestOperatorsReadTheSessionInTheTemporalUI(t *testing.T) {
	s, id := newTitledSession(t, "Release checklist")

	long := s.send(id, "slow:400:50") // 20 s: the test ends while it streams
	s.eventually("PROCESSING in the search attribute", func() bool {
		return s.apiState(id) == string(store.StateProcessing) && s.searchState(id) == string(store.StateProcessing)
	})
	s.eventually("details of the open response", func() bool {
		return strings.Contains(s.currentDetails(id), "open responses 1")
	})
	details := s.currentDetails(id)
	for _, want := range []string{s.agent.Name, s.user.ID, "Release checklist", "PROCESSING"} {
		require.Contains(t, details, want)
	}
	s.waitEnded(id, "resp-"+long)
	s.eventually("READY in the search attribute", func() bool {
		return s.apiState(id) == string(store.StateReady) && s.searchState(id) == string(store.StateReady)
	})
	require.Contains(t, s.currentDetails(id), "**State** READY")

	s.signal(id, workflows.SignalLifecycle, workflows.Lifecycle{Action: workflows.LifecycleDelete})
	run := s.tc.GetWorkflow(s.ctx, workflows.SessionWorkflowID(id), "")
	require.NoError(t, run.Get(s.ctx, nil))
	require.Equal(t, string(store.StateDeleted), s.searchState(id))

	summaries := map[string]string{}
	it := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(id), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		attrs := ev.GetActivityTaskScheduledEventAttributes()
		if attrs == nil {
			continue
		}
		var summary string
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &summary))
		}
		require.NotEmpty(t, summary, "activity %s has a summary", attrs.GetActivityType().GetName())
		summaries[attrs.GetActivityType().GetName()] = summary
	}
	require.Equal(t, "Deliver the held messages", summaries["Deliver"])
	require.Contains(t, summaries["Relay"], "Read runtime generation 1")
}

// observedStates are the states of the session-observed signals in the Session's
// current run, in order.
func (s *stack) observedStates(sessionID string) []string {
	var states []string
	it := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(s.t, err)
		sig := ev.GetWorkflowExecutionSignaledEventAttributes()
		if sig.GetSignalName() != activities.SignalSessionObserved {
			continue
		}
		var obs activities.SessionObservation
		require.NoError(s.t, converter.GetDefaultDataConverter().FromPayloads(sig.GetInput(), &obs))
		states = append(states, obs.State)
	}
	return states
}

// TestAShortTurnIsNotShownProcessing: a turn of a couple of seconds sends its
// workflow no PROCESSING observation (it cost two signals, PROCESSING then READY,
// each a workflow task), while a longer one is shown PROCESSING once it has lasted.
func TestAShortTurnIsNotShownProcessing(t *testing.T) {
	s, id := newTitledSession(t, "Pacing")
	// The first turn's observation goes at once whatever it shows: it tells the
	// workflow that the Relay delivers inputs on notice.
	s.waitEnded(id, "resp-"+s.send(id, "hello"))
	var before []string
	s.eventually("the Session observed READY after its first turn", func() bool {
		before = s.observedStates(id)
		return len(before) > 0 && before[len(before)-1] == string(store.StateReady) && s.searchState(id) == string(store.StateReady)
	})

	// Unheld, the short turn's PROCESSING went a second into it, before its end.
	s.waitEnded(id, "resp-"+s.send(id, "slow:40:50"))
	require.Equal(t, before, s.observedStates(id), "the short turn was not shown")
	long := s.send(id, "slow:400:50") // 20 s: the test ends while it streams
	s.eventually("the long turn shown PROCESSING", func() bool {
		return s.searchState(id) == string(store.StateProcessing)
	})
	require.Equal(t, append(before, string(store.StateProcessing)), s.observedStates(id), "the long turn was shown PROCESSING")
	r, found := s.response(id, "resp-"+long)
	require.True(t, found && r.Outcome == nil, "the long turn was shown while it went on")
}

// newTitledSession starts a stack with one worker and a Session of that title, which
// the workflow's current details name.
func newTitledSession(t *testing.T, title string) (*stack, string) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	_, err := s.st.RenameSession(s.ctx, id, s.user.ID, title)
	require.NoError(t, err)
	return s, id
}
