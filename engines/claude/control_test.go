package claude_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// truncated keeps the recording's journal up to and including the first line that
// contains marker: the box as it was at that moment.
func truncated(t *testing.T, rec recording, marker string) recording {
	t.Helper()
	for i, l := range rec.journal {
		if strings.Contains(string(l.Data), marker) {
			rec.journal = rec.journal[:i+1]
			return rec
		}
	}
	t.Fatalf("no journal line contains %q", marker)
	return rec
}

// recordedStdin returns the recorded stdin line that contains marker, decoded.
func recordedStdin(t *testing.T, rec recording, marker string) map[string]any {
	t.Helper()
	for _, line := range rec.stdin {
		if strings.Contains(line, marker) {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &v))
			return v
		}
	}
	t.Fatalf("no stdin line contains %q", marker)
	return nil
}

func written(t *testing.T, b *replayBox, writeID string) map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.writes {
		if id, data, _ := strings.Cut(w, " "); id == writeID {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &v))
			return v
		}
	}
	t.Fatalf("nothing written with id %s (writes: %v)", writeID, b.writes)
	return nil
}

// TestAnswerWritesWhatClaudeAccepted answers a pending can_use_tool and compares the
// stdin line with the one Claude Code accepted in the recording.
func TestAnswerWritesWhatClaudeAccepted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		answer engines.InteractionAnswer
	}{
		{"approval_allow", engines.InteractionAnswer{Decision: engines.DecisionApprove}},
		{"approval_deny", engines.InteractionAnswer{Decision: engines.DecisionDeny, Reason: "The person said no"}},
	} {
		full := loadRecording(t, tc.name)
		c, box := replayClient(t, truncated(t, full, `"can_use_tool"`))
		st, err := c.State(ctx)
		require.NoError(t, err)
		require.Len(t, st.PendingInteractions, 1)
		require.Equal(t, engines.StatusWaiting, st.Status)
		id := st.PendingInteractions[0].InteractionID

		require.ErrorIs(t, c.Answer(ctx, "not-"+id, tc.answer), engines.ErrInteractionNotOpen)
		require.Error(t, c.Answer(ctx, id, engines.InteractionAnswer{Decision: "maybe"}), "an answer outside the contract")
		require.NoError(t, c.Answer(ctx, id, tc.answer))
		require.Equal(t, recordedStdin(t, full, `"request_id":"`+id+`"`), written(t, box, "answer:"+id), tc.name)

		// Once Claude's echo is in the journal the answer is a redelivery.
		done, _ := replayClient(t, full)
		require.NoError(t, done.Answer(ctx, id, tc.answer))
	}
}

// TestSubmitWritesClaudesUserMessage compares the stdin line Submit writes with the one
// Claude Code accepted, and refuses an input id Claude cannot use as its uuid.
func TestSubmitWritesClaudesUserMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := loadRecording(t, "plain_text")
	want := recordedStdin(t, rec, `"type":"user"`)
	id := want["uuid"].(string)
	empty := rec
	empty.journal, empty.transcript = nil, nil
	c, box := replayClient(t, empty)
	require.NoError(t, c.Submit(ctx, engines.TextInput(id, "hello there")))
	require.Equal(t, want, written(t, box, "input:"+id))

	err := c.Submit(ctx, engines.TextInput("input-1", "hi"))
	var refused *engines.RuntimeInputRefused
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "invalid_input_id", refused.Code)

	// An input Claude's transcript already holds is not sent again.
	held, heldBox := replayClient(t, rec)
	require.NoError(t, held.Submit(ctx, engines.TextInput(id, "hello there")))
	require.Empty(t, heldBox.writes)
}
