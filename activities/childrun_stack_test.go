package activities_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// childReport is a data-subagent part's lifecycle report as the output log holds it.
type childReport struct {
	ResponseID *string
	ChildRunID string
	Status     string
	ControlRef string
}

// childReports returns the Session's child-run lifecycle reports in log order.
func (s *stack) childReports(sessionID string) []childReport {
	var out []childReport
	for _, p := range s.parts(sessionID) {
		var frame struct {
			Type string               `json:"type"`
			Data engines.SubagentData `json:"data"`
		}
		require.NoError(s.t, jsonUnmarshal(p.Frame, &frame))
		if frame.Type != "data-subagent" || frame.Data.Run == nil {
			continue
		}
		out = append(out, childReport{ResponseID: p.ResponseID, ChildRunID: frame.Data.ChildRunID, Status: frame.Data.Run.Status, ControlRef: frame.Data.Run.ControlRef})
	}
	return out
}

func TestStopChildRunReachesTheProgram(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	in := s.send(id, "delegate")
	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	reports := s.childReports(id)
	require.Len(t, reports, 1)
	started := reports[0]
	require.Equal(t, "running", started.Status)
	require.Equal(t, "resp-"+in, *started.ResponseID)
	require.NotEmpty(t, started.ControlRef)

	// The Relay recorded the child from the program's report: its public id, never
	// the native reference.
	row, err := s.st.GetChildRunByID(s.ctx, id, started.ChildRunID)
	require.NoError(t, err)
	require.Nil(t, row.NativeRef)
	require.Equal(t, "running", row.Status)
	require.Equal(t, started.ControlRef, *row.ControlRef)
	require.Equal(t, "resp-"+in, *row.ResponseID)

	s.signal(id, workflows.SignalStopChildRun, workflows.StopChildRun{ChildRunID: row.ID})
	s.eventually("the program to report the child stopped", func() bool { return len(s.childReports(id)) == 2 })
	stopped := s.childReports(id)[1]
	require.Equal(t, row.ID, stopped.ChildRunID)
	require.Equal(t, "stopped", stopped.Status)
	require.Nil(t, stopped.ResponseID, "the report belongs to no response")
	row, err = s.st.GetChildRunByID(s.ctx, id, row.ID)
	require.NoError(t, err)
	require.Equal(t, "stopped", row.Status, "the Relay recorded the program's last report")
	require.Equal(t, "resp-"+in, *row.ResponseID, "the child keeps the response it started in")

	// A second stop is refused by the program (the child has ended) and dropped; the
	// conversation goes on over the same connection.
	s.signal(id, workflows.SignalStopChildRun, workflows.StopChildRun{ChildRunID: row.ID})
	next := s.send(id, "quick")
	r2 := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	require.Len(t, s.childReports(id), 2, "nothing more was stopped")
	runs, err := s.st.ListChildRunsBySession(s.ctx, id)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "stopped", runs[0].Status)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the refused stop kept the runtime")
	s.requireGaplessLog(id)
}
