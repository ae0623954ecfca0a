package activities_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// TestClaudeCodeApprovalAnsweredAfterTheReaderReconnects: in Claude's default
// permission mode a Bash call asks through can_use_tool; the worker holding the
// connection stops, another takes the reader over, and the answer, saved and
// signalled as the API does, reaches Claude Code, which runs the command.
func TestClaudeCodeApprovalAnsweredAfterTheReaderReconnects(t *testing.T) {
	s := newClaudeStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	_, err := s.st.SetSessionPermissionMode(s.ctx, id, "default")
	require.NoError(t, err)

	in := s.send(id, `[[script:bash cmd="touch approved.txt"]]`)
	var interaction string
	s.eventually("the approval", func() bool {
		open, err := s.st.ListOpenInteractions(s.ctx, id)
		require.NoError(t, err)
		if len(open) == 0 {
			return false
		}
		interaction = open[0].InteractionID
		return true
	})
	s.eventually("WAITING_INPUT", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.State() == store.StateWaitingInput
	})
	stopA()
	s.startWorker("host-b-" + uniq())

	answer, err := json.Marshal(engines.InteractionAnswer{Decision: engines.DecisionApprove})
	require.NoError(t, err)
	_, err = s.st.SaveInteractionAnswer(s.ctx, id, interaction, answer, &s.user.ID)
	require.NoError(t, err)
	s.signal(id, workflows.SignalInteractionAnswered, workflows.InteractionAnswered{InteractionID: interaction})

	var r store.Response
	s.eventually("the response to end", func() bool {
		rs, err := s.st.ListResponsesBySession(s.ctx, id)
		require.NoError(t, err)
		for _, candidate := range rs {
			var ids []string
			require.NoError(t, json.Unmarshal(candidate.InputIDs, &ids))
			if slices.Contains(ids, in) && candidate.Outcome != nil {
				r = candidate
				return true
			}
		}
		return false
	})
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	it, err := s.st.GetInteractionByID(s.ctx, id, interaction)
	require.NoError(t, err)
	require.Equal(t, store.InteractionAnswered, it.State, "closed on the runtime's receipt")
	require.Contains(t, strings.Join(s.deltas(id, r.ResponseID), ""), "Tool finished")
	h, err := s.backend.Get(s.ctx, *s.session(id).SandboxID)
	require.NoError(t, err)
	defer h.Close()
	_, err = h.ReadFile(s.ctx, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")
	s.requireGaplessLog(id)
}
