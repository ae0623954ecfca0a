package activities_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestRuntimeDiagnosticsAreKeptForOperatorsNotStreamed: output the adapter cannot
// translate is stored with the Session as a diagnostic, in the Relay's batch, and
// never becomes a part of the browser stream.
func TestRuntimeDiagnosticsAreKeptForOperatorsNotStreamed(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	in := s.send(id, "noise")
	r := s.waitEnded(id, "resp-"+in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)

	diags, err := s.st.ListRuntimeDiagnostics(s.ctx, id)
	require.NoError(t, err)
	require.Len(t, diags, 1)
	require.Equal(t, "noise", diags[0].EventType)
	require.Contains(t, string(diags[0].Raw), in)
	for _, p := range s.parts(id) {
		require.False(t, strings.Contains(string(p.Frame), "noise"), "a diagnostic reached the stream: %s", p.Frame)
	}
}
