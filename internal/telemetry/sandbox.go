package telemetry

import (
	"context"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
)

// BoxLister lists a sandbox backend's boxes (sandbox.Backend's List).
type BoxLister interface {
	List(ctx context.Context) ([]sandbox.Info, error)
}

// boxStates are the states the boxes gauge always reports, 0 when empty.
var boxStates = []string{string(sandbox.StatePending), string(sandbox.StateRunning), string(sandbox.StatePaused),
	string(sandbox.StateTerminated), string(sandbox.StateFailed)}

// WatchBackend reports a worker's sandbox backend: its boxes by state and its
// prewarm pools' depth (depths may be nil for a backend without pools).
func (m *Metrics) WatchBackend(boxes BoxLister, depths PoolDepthFunc) {
	m.WatchBoxes(boxStates, func(ctx context.Context) (map[string]int, error) {
		infos, err := boxes.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("list boxes: %w", err)
		}
		counts := map[string]int{}
		for _, in := range infos {
			counts[string(in.State)]++
		}
		return counts, nil
	})
	if depths != nil {
		m.WatchPrewarm(depths)
	}
}
