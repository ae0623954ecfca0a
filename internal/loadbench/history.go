package loadbench

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/client"

	"github.com/astrabox/astrabox/workflows"
)

// historyFigures are Temporal history events per conversational turn.
type historyFigures struct{ p50, p99 float64 }

// historyPerTurn reads each Session workflow's history length (the current run's:
// continue-as-new starts a new history) and divides it by the turns it ran.
func (b *bench) historyPerTurn(ctx context.Context, sessions []*session, turns int) (historyFigures, error) {
	tc, err := client.Dial(client.Options{HostPort: b.stack.TemporalAddress(), Logger: nopLogger{}})
	if err != nil {
		return historyFigures{}, fmt.Errorf("dial temporal: %w", err)
	}
	defer tc.Close()
	var per []float64
	for _, s := range sessions {
		d, err := tc.DescribeWorkflowExecution(ctx, workflows.SessionWorkflowID(s.id), "")
		if err != nil {
			return historyFigures{}, fmt.Errorf("describe workflow of %s: %w", s.id, err)
		}
		per = append(per, float64(d.GetWorkflowExecutionInfo().GetHistoryLength())/float64(turns))
	}
	slices.Sort(per)
	if len(per) == 0 {
		return historyFigures{}, nil
	}
	return historyFigures{p50: per[len(per)*50/100], p99: per[min(len(per)-1, len(per)*99/100)]}, nil
}

// nopLogger keeps the Temporal client quiet.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
