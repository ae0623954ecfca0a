package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// parallelCases are the recordings of ten prompts written to Claude's stdin at once:
// from idle and while a reply streams Claude merges the queued prompts into one user
// line, during a tool it absorbs each into the running turn.
var parallelCases = []string{"parallel_prompts", "parallel_prompts_while_streaming", "parallel_prompts_during_tool"}

// sentInputs returns the uuids of the user messages the recording wrote to stdin, in order.
func sentInputs(t *testing.T, rec recording) []string {
	t.Helper()
	var ids []string
	for _, line := range rec.stdin {
		var m struct {
			Type string `json:"type"`
			UUID string `json:"uuid"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m.Type == "user" {
			ids = append(ids, m.UUID)
		}
	}
	return ids
}

// TestParallelPromptsAreEachAdmittedOnce checks that every input Claude consumed, also
// the ones it merged into another input's user line, is admitted exactly once, named by
// the response that answers it, and reported in the runtime's own state.
func TestParallelPromptsAreEachAdmittedOnce(t *testing.T) {
	for _, name := range parallelCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := loadRecording(t, name)
			sent := sentInputs(t, rec)
			require.GreaterOrEqual(t, len(sent), 10, "ten prompts sent at once")
			c, _ := replayClient(t, rec)
			events := readAll(t, c)

			admitted := map[string]int{}
			answeredBy := map[string]string{}
			for _, ev := range events {
				switch e := ev.(type) {
				case engines.InputAdmitted:
					admitted[e.InputID]++
				case engines.ResponseStarted:
					for _, id := range e.InputIDs {
						answeredBy[id] = e.ResponseID
					}
				}
			}
			for _, id := range sent {
				require.Equal(t, 1, admitted[id], "input %s is admitted exactly once", id)
				require.NotEmpty(t, answeredBy[id], "a response names input %s", id)
			}
			require.Len(t, admitted, len(sent), "nothing but the sent inputs is admitted")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := c.State(ctx)
			require.NoError(t, err)
			// The state also lists the uuids of Claude's own user lines (tool results),
			// which name no input and close no custody.
			require.Equal(t, sent, slices.DeleteFunc(slices.Clone(st.AdmittedInputIDs), func(id string) bool { return !slices.Contains(sent, id) }),
				"the state lists every admitted input, in send order")
			require.Empty(t, st.QueuedInputIDs)
			require.Empty(t, st.OpenResponses)
			require.Equal(t, engines.StatusIdle, st.Status)
		})
	}
}

// TestMergedPromptsWaitForTheirUserLine replays parallel_prompts with the transcript as
// it was before Claude wrote the merged user line: the queued prompts have only their
// enqueue and dequeue lines on disk, which a killed process would lose, so none of them
// is admitted until the user line naming them appears.
func TestMergedPromptsWaitForTheirUserLine(t *testing.T) {
	t.Parallel()
	rec := loadRecording(t, "parallel_prompts")
	sent := sentInputs(t, rec)
	full := rec.transcript
	lines := bytes.SplitAfter(full, []byte("\n"))
	merged := slices.IndexFunc(lines, func(l []byte) bool { return bytes.Contains(l, []byte(`"mergedSendUuids"`)) })
	require.Positive(t, merged)
	require.Contains(t, string(lines[merged-1]), `"operation":"dequeue"`, "Claude dequeues the prompts before it writes their user line")
	rec.transcript = bytes.Join(lines[:merged], nil)

	c, _ := replayClient(t, rec)
	var admitted []string
	for _, ev := range readAll(t, c) {
		if a, ok := ev.(engines.InputAdmitted); ok {
			admitted = append(admitted, a.InputID)
		}
	}
	require.Equal(t, sent[:1], admitted, "only the first prompt has its user line")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sent[:1], st.AdmittedInputIDs)

	rec.transcript = full
	c, _ = replayClient(t, rec)
	st, err = c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, sent, st.AdmittedInputIDs, "the merged user line admits all of them")
}
