package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/store"
)

// codexMount is where boxes see the pinned Codex release.
const codexMount = "/opt/codex"

// newCodexStack runs the real pinned Codex app-server in local boxes, reaching the
// in-process scripted model's Responses API through the host-side credential proxy.
func newCodexStack(t *testing.T) (*stack, *devmodel.Server) {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Codex)
	require.NoError(t, err, "run `make deps-agents`")
	rel, err := filepath.Rel(prog.Dir, prog.Command[0])
	require.NoError(t, err)
	model := devmodel.New(devmodel.Options{SlowDelay: 100 * time.Millisecond})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	return newStackWith(t, engineSetup{
		kind: codex.EngineKind,
		adapter: codex.NewAdapter(codex.Config{Command: []string{filepath.Join(codexMount, rel)},
			PathDirs:     []string{filepath.Join(codexMount, "codex-path")},
			ModelBaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", activities.ModelForwardPort)}),
		mounts: []sandbox.Mount{{Source: prog.Dir, Target: codexMount}},
		egress: map[string]egress.Route{activities.ModelForwardName: {Upstream: model.URL(),
			Headers: map[string]string{"Authorization": "Bearer sk-host-side"}}},
	}), model
}

// TestCodexTwoInputsOneSentWhileWorking sends a second input while Codex streams the
// first response: Codex takes it into the running turn, so one response answers both.
func TestCodexTwoInputsOneSentWhileWorking(t *testing.T) {
	s, _ := newCodexStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	first := s.send(id, devmodel.Directive("slow", "chunks", "10", "delay", "200ms"))
	s.eventually("the first response to stream", func() bool { return strings.Contains(s.text(id), "Slow chunk") })
	second := s.send(id, "hello again")
	s.eventually("both inputs answered and the program idle", func() bool {
		return s.admittedAndIdle(id, first) && s.admittedAndIdle(id, second) && s.answerEnded(id, second)
	})
	responses, err := s.st.ListResponsesBySession(s.ctx, id)
	require.NoError(t, err)
	require.Len(t, responses, 1, "the second input joined the running turn")
	var ids []string
	require.NoError(t, json.Unmarshal(responses[0].InputIDs, &ids))
	require.Equal(t, []string{first, second}, ids)
	require.Equal(t, store.OutcomeCompleted, *responses[0].Outcome)
	s.requireGaplessLog(id)
}

// TestCodexRemovedBoxFailsTheResponseAndResumesTheThread removes the box while Codex
// streams: the open response ends failed (runtime_lost), and the next message resumes
// the same thread from its mirrored and restored rollout in a new box.
func TestCodexRemovedBoxFailsTheResponseAndResumesTheThread(t *testing.T) {
	s, model := newCodexStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	hello := s.send(id, "hello from the first box")
	s.eventually("the first turn", func() bool { return s.admittedAndIdle(id, hello) })
	s.send(id, devmodel.Directive("slow", "chunks", "200", "delay", "200ms"))
	s.eventually("streaming", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.OpenResponses > 0
	})
	before := s.session(id)
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))
	s.eventually("the lost response to fail", func() bool {
		r, err := s.st.GetLastEndedResponse(s.ctx, id)
		return err == nil && *r.Outcome == store.OutcomeFailed && *r.NativeReason == store.NativeReasonRuntimeLost
	})

	again := s.send(id, "are you still there?")
	s.eventually("the next message answered in a new box", func() bool { return s.admittedAndIdle(id, again) && s.answerEnded(id, again) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same Codex thread")
	reqs := model.Requests()
	require.True(t, bytes.Contains(reqs[len(reqs)-1].Body, []byte("hello from the first box")), "the model saw the earlier turns")
	s.requireGaplessLog(id)
}

// TestCodexWorkerKilledWhileStreamingContinuesFromTheRecordedCursor stops the worker
// holding the app-server's connection mid-response; another worker reconnects to the
// same box and app-server and continues from the recorded cursor.
func TestCodexWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	s, _ := newCodexStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()

	const chunks = 30
	in := s.send(id, devmodel.Directive("slow", "chunks", strconv.Itoa(chunks), "delay", "200ms"))
	s.eventually("streaming to be under way", func() bool { return strings.Count(s.text(id), "Slow chunk") >= 3 })
	stopA()
	require.Less(t, strings.Count(s.text(id), "Slow chunk"), chunks, "the response was still streaming")
	s.startWorker("host-b-" + uniq())

	s.eventually("the response to finish", func() bool { return s.admittedAndIdle(id, in) && s.answerEnded(id, in) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	s.requireSlowChunksOnce(id, chunks)
	s.requireGaplessLog(id)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the same box: a lost connection is not a lost box")
}

// answerEnded reports whether a response that lists the input has ended.
func (s *stack) answerEnded(sessionID, inputID string) bool {
	responses, err := s.st.ListResponsesBySession(s.ctx, sessionID)
	require.NoError(s.t, err)
	for _, r := range responses {
		var ids []string
		require.NoError(s.t, json.Unmarshal(r.InputIDs, &ids))
		if r.Outcome != nil && slices.Contains(ids, inputID) {
			return true
		}
	}
	return false
}
