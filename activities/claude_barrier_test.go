package activities_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/store"
)

// maxKillLag is how soon after its admission each box is destroyed.
const maxKillLag = 50 * time.Millisecond

// TestClaudeCodeAdmittedInputsSurviveTheBoxKilledRightAfter is the session-log
// barrier with the real Claude Code: 20 times, a box is destroyed within 50 ms of the
// admission of an input that starts a long reply (a kill that comes later is made
// again with a new input; its input is checked too), so only the mirror the admission
// waited on can have carried the input out of the box. The box that finally answers
// resumes a conversation whose transcript holds every admitted input in one user
// turn each (none lost, none sent again).
func TestClaudeCodeAdmittedInputsSurviveTheBoxKilledRightAfter(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	markers := map[string]string{}
	var admitted []string
	var lags []time.Duration
	// A kill the test saw the admission of too late (a loaded machine) still counts
	// for the check below but not towards the 20 within maxKillLag.
	fast := 0
	for attempt := 0; fast < barrierKills; attempt++ {
		require.Less(t, attempt, 3*barrierKills, "only %d of %d kills came within %v of the admission", fast, attempt, maxKillLag)
		marker := fmt.Sprintf("barrier-%d-%s", attempt, uniq())
		in := s.send(id, marker+" "+devmodel.Directive("slow", "chunks", "100", "delay", "100ms"))
		got := s.waitAdmitted(in)
		box := s.session(id).SandboxID
		require.NotNil(t, box)
		lag := time.Since(*got.AdmittedAt)
		require.NoError(t, s.backend.Destroy(s.ctx, *box))
		if lag < maxKillLag {
			fast++
		}
		lags = append(lags, lag)
		admitted = append(admitted, in)
		markers[in] = marker
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	t.Logf("%d kills, %d within %v of the admission: min %v, median %v, max %v", len(lags), fast, maxKillLag,
		lags[0], lags[len(lags)/2], lags[len(lags)-1])

	last := s.send(id, "are you still there?")
	s.eventually("the last message answered in a new box", func() bool { return s.admittedAndIdle(id, last) })
	r, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)

	sess := s.session(id)
	h, err := s.backend.Get(s.ctx, *sess.SandboxID)
	require.NoError(t, err)
	defer h.Close()
	data, err := h.ReadFile(s.ctx, claude.TranscriptPath("/workspace/.home/.claude", "/workspace", *sess.EngineSessionKey))
	require.NoError(t, err)
	userTurns := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Type != "user" {
			continue
		}
		for in, marker := range markers {
			if strings.Contains(line, marker) {
				userTurns[in]++
			}
		}
	}
	for i, in := range admitted {
		require.Equal(t, 1, userTurns[in], "admitted input %d (%s) in one user turn of the restored transcript", i, markers[in])
		stored, err := s.st.GetInputByID(s.ctx, in)
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, stored.State)
	}
}
