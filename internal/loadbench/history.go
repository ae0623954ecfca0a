package loadbench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/astrabox/astrabox/workflows"
)

// historyFigures are Temporal history events per conversational turn.
type historyFigures struct {
	p50, p99 float64
	// measuredByKind is the events the measured turns added to the Sessions'
	// histories, per measured turn, by eventKinds' kind: what Temporal does for a
	// turn once the Session is up, where the whole history also holds its bring-up.
	measuredByKind map[string]float64
	// measuredSignals is the measured turns' signals per measured turn by signal
	// name: who asked Temporal for work during a turn (each signal costs a workflow
	// task).
	measuredSignals map[string]float64
}

// eventKinds are the kinds a measured turn's history events are counted by, in the
// order reported.
var eventKinds = []string{"workflow tasks", "signals", "activities", "timers", "search attributes and memo", "markers", "other"}

func eventKind(t enumspb.EventType) string {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		return "workflow tasks"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		return "signals"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return "activities"
	case enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_CANCELED:
		return "timers"
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
		return "search attributes and memo"
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		return "markers"
	}
	return "other"
}

// historyPerTurn reads each Session workflow's history (the current run's:
// continue-as-new starts a new history), divides its length by the turns it ran,
// and counts the events of the measured turns (from start to end) by kind.
func (b *bench) historyPerTurn(ctx context.Context, sessions []*session, turns, measuredTurns int, start, end time.Time) (historyFigures, error) {
	tc, err := client.Dial(client.Options{HostPort: b.stack.TemporalAddress(), Logger: nopLogger{}})
	if err != nil {
		return historyFigures{}, fmt.Errorf("dial temporal: %w", err)
	}
	defer tc.Close()
	var per []float64
	byKind, signals := map[string]float64{}, map[string]float64{}
	for _, s := range sessions {
		// The current run's history (no run id), read whole: its length is the
		// events counted.
		it := tc.GetWorkflowHistory(ctx, workflows.SessionWorkflowID(s.id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		length := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return historyFigures{}, fmt.Errorf("read history of %s: %w", s.id, err)
			}
			length++
			if at := ev.GetEventTime().AsTime(); !at.Before(start) && !at.After(end) {
				byKind[eventKind(ev.GetEventType())]++
				if sig := ev.GetWorkflowExecutionSignaledEventAttributes(); sig != nil {
					signals[sig.GetSignalName()]++
				}
			}
		}
		per = append(per, float64(length)/float64(turns))
	}
	if len(per) == 0 {
		return historyFigures{}, nil
	}
	for _, counts := range []map[string]float64{byKind, signals} {
		for k := range counts {
			counts[k] /= float64(len(sessions) * measuredTurns)
		}
	}
	slices.Sort(per)
	return historyFigures{p50: per[len(per)*50/100], p99: per[min(len(per)-1, len(per)*99/100)], measuredByKind: byKind, measuredSignals: signals}, nil
}

// byKindLine reports the measured turns' events per turn, in all and by kind.
func (h historyFigures) byKindLine() string {
	var all float64
	var b strings.Builder
	for _, k := range eventKinds {
		all += h.measuredByKind[k]
		fmt.Fprintf(&b, ", %s %.2f", k, h.measuredByKind[k])
	}
	return fmt.Sprintf("%.2f%s", all, b.String())
}

// signalsLine reports the measured turns' signals per turn by name, most first
// ("none" when there were none).
func (h historyFigures) signalsLine() string {
	names := slices.Collect(maps.Keys(h.measuredSignals))
	if len(names) == 0 {
		return "none"
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(h.measuredSignals[b], h.measuredSignals[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.2f", name, h.measuredSignals[name])
	}
	return strings.Join(parts, ", ")
}

// nopLogger keeps the Temporal client quiet.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
