package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// StopRelay ends the Relay it names, whether it comes while the Relay runs or before
// the Relay began on the worker, and leaves any other Relay of the runtime running.
func TestAStopEndsOnlyTheRelayItNames(t *testing.T) {
	t.Parallel()
	l := &liveRuntime{sessionID: "s-1", generation: 1}

	first, stopFirst := context.WithCancel(context.Background())
	defer stopFirst()
	require.True(t, l.beginRelay("run/1", stopFirst))
	l.stopRelay("run/0")
	require.NoError(t, first.Err(), "an earlier Relay's stop leaves this one running")
	l.stopRelay("run/1")
	require.Error(t, first.Err(), "the stop ended the Relay it names")
	l.endRelay("run/1")

	second, stopSecond := context.WithCancel(context.Background())
	defer stopSecond()
	require.True(t, l.beginRelay("run/2", stopSecond), "a later Relay begins after the last one's stop")
	l.stopRelay("run/1")
	require.NoError(t, second.Err(), "a late stop of the Relay before is not taken for this one")
	l.endRelay("run/2")

	l.stopRelay("run/3")
	require.False(t, l.beginRelay("run/3", func() {}), "a Relay stopped before it began does not run")
	require.True(t, l.beginRelay("", func() {}), "a Relay without a name is stopped by Temporal's cancellation alone")
}
