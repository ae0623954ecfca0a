package activities_test

import (
	"strings"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
	"github.com/astrabox/astrabox/workflows"
)

// TestARelayDeliveringOnNoticeSparesTheWorkflowItsDeliver: once the Relay says it
// hands new inputs over on PostgreSQL's notice, the next turns are answered with no
// Deliver activity in the workflow's history: the one Deliver is the runtime's
// bring-up's, and a re-sent input signal still runs the workflow's own.
func TestARelayDeliveringOnNoticeSparesTheWorkflowItsDeliver(t *testing.T) {
	s, id := relayDeliveringOnNotice(t)
	signalled := s.signalsReceived(id, workflows.SignalInputAccepted)
	for range 3 {
		s.waitEnded(id, "resp-"+s.send(id, "quick"))
	}
	require.Equal(t, 1, s.activitiesScheduled(id, "Deliver"), "only the bring-up's Deliver ran")
	require.Equal(t, signalled, s.signalsReceived(id, workflows.SignalInputAccepted), "the inputs were not signalled")

	// The re-signal sweep's signal for an input still held makes the workflow deliver.
	s.signal(id, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: "in-resent", Resent: true})
	s.eventually("the workflow's own Deliver", func() bool { return s.activitiesScheduled(id, "Deliver") == 2 })
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	require.Equal(t, 2, s.activitiesScheduled(id, "Deliver"), "the next input is the Relay's again")
}

// TestNoticedInputsReachTheProgramFromTheirNoticesInOrderEachOnce: once the Relay
// listens, an input sent alone reaches the program from its notification (no read
// of custody), its text as sent; a burst sent while the program works, one input
// too big for its notification in the middle, reaches it in accepted order, the big
// one through a read. The program's own conversation holds every input once, in
// order, each text exactly as sent.
func TestNoticedInputsReachTheProgramFromTheirNoticesInOrderEachOnce(t *testing.T) {
	s := newStack(t)
	s.tel = telemetry.NewWithTracer(nil, testutil.Logger(t))
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	handed := func(source string) int {
		return int(promtest.ToFloat64(s.tel.Metrics.InputsHandedOver.WithLabelValues(source)))
	}
	var all []conversationInput
	send := func(text string) string {
		in := s.send(id, text)
		all = append(all, conversationInput{in, text})
		return in
	}
	s.waitEnded(id, "resp-"+send("quick"))
	s.eventually("the Relay to say it delivers on notice", func() bool { return s.workflowState(id).Observed.DeliversOnNotice })
	require.Equal(t, 0, handed("notice"))
	reads := handed("read")

	for _, text := range []string{"alone", "  spaced  \n a second line ", "ünïcode ✓ \"quoted\""} {
		s.waitEnded(id, "resp-"+send(text))
	}
	require.Equal(t, 3, handed("notice"), "each from its notification")
	require.Equal(t, reads, handed("read"), "no read of custody")

	busy := send("slow:5:100")
	s.eventually("the program to work", func() bool { _, ok := s.response(id, "resp-"+busy); return ok })
	burst := []string{"burst one", strings.Repeat("big ", pubsub.MaxNoticeContent/4+1), "burst three", "burst four"}
	var last string
	for _, text := range burst {
		last = send(text)
	}
	s.waitEnded(id, "resp-"+last)
	previous := s.waitEnded(id, "resp-"+busy)
	for _, in := range all[len(all)-len(burst):] {
		r := s.waitEnded(id, "resp-"+in.ID)
		require.Equal(t, store.OutcomeCompleted, *r.Outcome)
		require.Less(t, *previous.EndedSeq, r.StartedSeq, "answered in accepted order")
		previous = r
	}
	require.Greater(t, handed("read"), reads, "the big input was read from custody")
	require.Equal(t, len(all), handed("notice")+handed("read"), "every input handed over once")
	s.requireGaplessLog(id)

	require.Equal(t, all, s.conversationInputs(id), "the program's conversation: every input once, in accepted order, as sent")
}

// relayDeliveringOnNotice starts a stack and a Session whose first turn ended and
// whose Relay has told the workflow that it delivers on notice.
func relayDeliveringOnNotice(t *testing.T) (*stack, string) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	s.eventually("the Relay to say it delivers on notice", func() bool { return s.workflowState(id).Observed.DeliversOnNotice })
	return s, id
}

// workflowState is the Session workflow's state, from its query.
func (s *stack) workflowState(sessionID string) workflows.SessionState {
	s.t.Helper()
	res, err := s.tc.QueryWorkflow(s.ctx, workflows.SessionWorkflowID(sessionID), "", workflows.QuerySessionState)
	require.NoError(s.t, err)
	var st workflows.SessionState
	require.NoError(s.t, res.Get(&st))
	return st
}

// activitiesScheduled counts the activities of a type the Session workflow's current
// run scheduled.
func (s *stack) activitiesScheduled(sessionID, activityType string) int {
	return s.historyEvents(sessionID, func(ev *historypb.HistoryEvent) bool {
		return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityType
	})
}

// signalsReceived counts the signals of a name the Session workflow's current run
// received.
func (s *stack) signalsReceived(sessionID, name string) int {
	return s.historyEvents(sessionID, func(ev *historypb.HistoryEvent) bool {
		return ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == name
	})
}

// historyEvents counts the events of the Session workflow's current run that match.
func (s *stack) historyEvents(sessionID string, match func(*historypb.HistoryEvent) bool) int {
	s.t.Helper()
	n := 0
	it := s.tc.GetWorkflowHistory(s.ctx, workflows.SessionWorkflowID(sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(s.t, err)
		if match(ev) {
			n++
		}
	}
	return n
}

// TestARelayWhoseNoticesStopHandsDeliveryBackToTheWorkflow: when the worker's notice
// listener closes, the Relay says it no longer delivers on notice, and the workflow's
// own Deliver hands the next input over.
func TestARelayWhoseNoticesStopHandsDeliveryBackToTheWorkflow(t *testing.T) {
	s, id := relayDeliveringOnNotice(t)
	require.Equal(t, 1, s.activitiesScheduled(id, "Deliver"))

	require.NoError(t, s.notices.Close())
	s.eventually("the Relay to say it no longer does", func() bool { return !s.workflowState(id).Observed.DeliversOnNotice })
	s.waitEnded(id, "resp-"+s.send(id, "quick"))
	require.Equal(t, 2, s.activitiesScheduled(id, "Deliver"), "the workflow delivered the input")
}
