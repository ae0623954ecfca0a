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

	// The child's facts as the program reported them (the relay does not record
	// child_runs rows from the output yet).
	ref := started.ControlRef
	row, err := s.st.UpsertChildRun(s.ctx, store.ChildRunReport{SessionID: id, NativeRef: "child-" + in, Status: started.Status, ControlRef: &ref})
	require.NoError(t, err)
	require.Equal(t, started.ChildRunID, row.ID, "the public id minted from the native reference")

	s.signal(id, workflows.SignalStopChildRun, workflows.StopChildRun{ChildRunID: row.ID})
	s.eventually("the program to report the child stopped", func() bool { return len(s.childReports(id)) == 2 })
	stopped := s.childReports(id)[1]
	require.Equal(t, row.ID, stopped.ChildRunID)
	require.Equal(t, "stopped", stopped.Status)
	require.Nil(t, stopped.ResponseID, "the report belongs to no response")

	// A second stop is refused by the program (the child has ended) and dropped; the
	// conversation goes on over the same connection.
	s.signal(id, workflows.SignalStopChildRun, workflows.StopChildRun{ChildRunID: row.ID})
	next := s.send(id, "quick")
	r2 := s.waitEnded(id, "resp-"+next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	require.Len(t, s.childReports(id), 2, "nothing more was stopped")
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the refused stop kept the runtime")
	s.requireGaplessLog(id)
}
