package activities_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/store"
)

// barrierKills is how many times TestAdmittedInputsSurviveTheBoxKilledRightAfter
// kills a box right after an admission.
const barrierKills = 20

// waitAdmitted polls the input fast (the admission is the moment the test races
// against) and returns it once it is recorded admitted.
func (s *stack) waitAdmitted(inputID string) store.Input {
	s.t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		in, err := s.st.GetInputByID(s.ctx, inputID)
		require.NoError(s.t, err)
		if in.State == store.InputAdmitted {
			return in
		}
		select {
		case <-s.ctx.Done():
			s.t.Fatalf("timed out waiting for input %s to be admitted", inputID)
		case <-tick.C:
		}
	}
}

// TestAdmittedInputsSurviveTheBoxKilledRightAfter is the session-log barrier: an
// input recorded admitted is in the mirror of the program's native log, so a box
// destroyed right after the admission (20 times, each time a few milliseconds after
// it) is replaced by one whose restored conversation holds every admitted input,
// each once (none is sent again).
func TestAdmittedInputsSurviveTheBoxKilledRightAfter(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	var admitted []string
	var lags []time.Duration
	for range barrierKills {
		// A long reply keeps the program working, so only the admission's mirror can
		// have carried the input out of the box.
		in := s.send(id, "slow:1000:100")
		got := s.waitAdmitted(in)
		box := s.session(id).SandboxID
		require.NotNil(t, box)
		require.NoError(t, s.backend.Destroy(s.ctx, *box))
		lags = append(lags, time.Since(*got.AdmittedAt))
		admitted = append(admitted, in)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	t.Logf("admission to box destroyed: min %v, median %v, max %v", lags[0], lags[len(lags)/2], lags[len(lags)-1])

	last := s.send(id, "quick")
	r := s.waitEnded(id, "resp-"+last)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)

	// The mirror keeps entries, not bytes: count the input entries by their fields.
	conversation := s.conversationInputs(id)
	inputs := map[string]int{}
	for _, in := range conversation {
		inputs[in.ID]++
	}
	for i, in := range admitted {
		require.Equal(t, 1, inputs[in], "admitted input %d (%s) once in the restored conversation:\n%v", i, in, conversation)
		stored, err := s.st.GetInputByID(s.ctx, in)
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, stored.State)
	}
}

// conversationInput is an input as the scripted program's conversation log holds it.
type conversationInput struct{ ID, Text string }

// conversationInputs reads the inputs of the scripted program's conversation log from
// the Session's current box, in the order the program took them.
func (s *stack) conversationInputs(sessionID string) []conversationInput {
	s.t.Helper()
	sess := s.session(sessionID)
	h, err := s.backend.Get(s.ctx, *sess.SandboxID)
	require.NoError(s.t, err)
	defer h.Close()
	data, err := h.ReadFile(s.ctx, scriptengine.TranscriptPath(&engines.RuntimeIdentity{HomeDir: "/workspace/.home"}, *sess.EngineSessionKey))
	require.NoError(s.t, err)
	var out []conversationInput
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			InputID string  `json:"input_id"`
			Text    *string `json:"text"`
		}
		require.NoError(s.t, json.Unmarshal([]byte(line), &e), line)
		if e.Text != nil {
			out = append(out, conversationInput{e.InputID, *e.Text})
		}
	}
	return out
}

// TestIdleReleaseMirrorsTheLogsTailBeforeTheBoxGoes: a turn the program writes to
// its log after reporting the response's end (as Claude Code does) is mirrored
// before the idle box is released, so the next box resumes with it.
func TestIdleReleaseMirrorsTheLogsTailBeforeTheBoxGoes(t *testing.T) {
	s := newStack(t)
	s.startWorkerWith("host-a-"+uniq(), activities.Settings{HeartbeatEvery: time.Second, IdleRelease: 2 * time.Second})
	id := s.newSession()

	in := s.send(id, "late")
	s.waitEnded(id, "resp-"+in)
	s.eventually("the idle box to be released", func() bool { return s.session(id).RuntimeUnavailable })
	streams, err := s.st.ListSessionLogStreams(s.ctx, id)
	require.NoError(t, err)
	require.Len(t, streams, 1)
	entries, err := s.st.ListSessionLogEntries(s.ctx, id, streams[0])
	require.NoError(t, err)
	require.Len(t, entries, 2, "the input and its late turn")
	require.Contains(t, string(entries[1].Entry), "resp-"+in)
}

// TestAnAdmissionWhoseMirrorLostEntriesMirrorsTheLogWhole: an admission's batch
// carries the session log's new entries counted from the mirror's cursor; when the
// mirror lost entries since (rows deleted here), the batch is refused, the log is
// mirrored whole on its own, and the admission is recorded after it.
func TestAnAdmissionWhoseMirrorLostEntriesMirrorsTheLogWhole(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)
	const prefix = "session_log:" // the scripted program's one log is the only stream
	var streams []string
	s.eventually("the first turn mirrored, its input and its turn", func() bool {
		var err error
		streams, err = s.st.ListSessionLogStreams(s.ctx, id)
		require.NoError(t, err)
		if len(streams) != 1 {
			return false
		}
		entries, err := s.st.ListSessionLogEntries(s.ctx, id, streams[0])
		require.NoError(t, err)
		return len(entries) == 2
	})
	require.True(t, strings.HasPrefix(streams[0], prefix))

	lease, err := s.st.GetReaderLeaseBySession(s.ctx, id)
	require.NoError(t, err)
	s.dropSessionLogMirror(id)

	second := s.send(id, "quick")
	require.Equal(t, store.InputAdmitted, s.waitAdmitted(second).State)
	entries, err := s.st.ListSessionLogEntries(s.ctx, id, streams[0])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), 3, "the first turn's entries mirrored again, and the second input")
	require.Contains(t, string(entries[0].Entry), first)
	require.Contains(t, string(entries[2].Entry), second)
	s.waitEnded(id, "resp-"+second)
	after, err := s.st.GetReaderLeaseBySession(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, lease.Generation, after.Generation, "the same Relay recorded it: the refused batch did not end it")
}

// TestAMirrorAfterAnEndWhoseRowsWentMirrorsTheLogWhole: the mirror made once a
// response ended goes with other Relays' batches, counted from the mirror's cursor;
// when the mirror lost entries since (rows deleted here, after the admission), that
// batch is refused and the log is mirrored whole on its own.
func TestAMirrorAfterAnEndWhoseRowsWentMirrorsTheLogWhole(t *testing.T) {
	s := newStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()
	first := s.send(id, "quick")
	s.waitEnded(id, "resp-"+first)

	second := s.send(id, "slow:10:50")
	s.waitAdmitted(second)
	s.dropSessionLogMirror(id)
	s.waitEnded(id, "resp-"+second)

	var entries []store.SessionLogEntry
	s.eventually("both inputs and both turns, mirrored again once the second ended", func() bool {
		streams, err := s.st.ListSessionLogStreams(s.ctx, id)
		require.NoError(t, err)
		if len(streams) != 1 {
			return false
		}
		entries, err = s.st.ListSessionLogEntries(s.ctx, id, streams[0])
		require.NoError(t, err)
		return len(entries) >= 4
	})
	require.Len(t, entries, 4)
	require.Contains(t, string(entries[0].Entry), first)
	require.Contains(t, string(entries[2].Entry), second)
	require.Contains(t, string(entries[3].Entry), "resp-"+second)
}

// dropSessionLogMirror deletes a Session's mirrored session-log rows behind the
// Relay's back, so its mirror's cursor counts more entries than the rows hold.
func (s *stack) dropSessionLogMirror(sessionID string) {
	s.t.Helper()
	conn, err := pgx.Connect(s.ctx, s.dsn)
	require.NoError(s.t, err)
	defer conn.Close(s.ctx)
	_, err = conn.Exec(s.ctx, `DELETE FROM session_log_entries WHERE session_id = $1`, sessionID)
	require.NoError(s.t, err)
}
