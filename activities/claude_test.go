package activities_test

import (
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
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// claudeMount is where boxes see the pinned Claude Code release.
const claudeMount = "/opt/claude"

// newClaudeStack runs the real pinned Claude Code in local boxes, reaching the
// in-process scripted model server through the host-side credential proxy. wrap, when
// given, rewrites the command the adapter starts it with.
func newClaudeStack(t *testing.T, wrap ...func(command []string) []string) *stack {
	t.Helper()
	s, _ := newClaudeStackWithModel(t, wrap...)
	return s
}

// newClaudeStackWithModel is newClaudeStack that also returns its scripted model server.
func newClaudeStackWithModel(t *testing.T, wrap ...func(command []string) []string) (*stack, *devmodel.Server) {
	t.Helper()
	setup, model := claudeSetup(t, wrap...)
	return newStackWith(t, setup), model
}

// claudeSetup is the engine setup of newClaudeStack, for a test to adjust, and the
// scripted model server it reaches.
func claudeSetup(t *testing.T, wrap ...func(command []string) []string) (engineSetup, *devmodel.Server) {
	t.Helper()
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "run `make deps-agents`")
	rel, err := filepath.Rel(prog.Dir, prog.Command[0])
	require.NoError(t, err)
	model := devmodel.New(devmodel.Options{SlowDelay: 100 * time.Millisecond})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	command := append([]string{filepath.Join(claudeMount, rel)}, prog.Command[1:]...)
	for _, w := range wrap {
		command = w(command)
	}
	return engineSetup{
		kind:    claude.EngineKind,
		adapter: claude.NewAdapter(claude.Config{Command: command}),
		mounts:  []sandbox.Mount{{Source: prog.Dir, Target: claudeMount}},
		egress: map[string]egress.Route{activities.ModelForwardName: {Upstream: model.URL(),
			Headers: map[string]string{"x-api-key": "sk-host-side"}}},
	}, model
}

// TestClaudeCodeTwoInputsOneSentWhileWorking is the first Claude Code end-to-end
// scenario through SessionWorkflow: two inputs in one conversation, the second sent
// while the first response streams. Claude Code's own queue decides which response
// answers the second input.
func TestClaudeCodeTwoInputsOneSentWhileWorking(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	first := s.send(id, devmodel.Directive("slow", "chunks", "10", "delay", "200ms"))
	s.eventually("the first response to start", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		return f.OpenResponses > 0
	})
	second := s.send(id, "hello again")

	s.eventually("both inputs answered and the program idle", func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, id)
		require.NoError(t, err)
		if f.State() != store.StateReady {
			return false
		}
		answered := map[string]bool{}
		responses, err := s.st.ListResponsesBySession(s.ctx, id)
		require.NoError(t, err)
		for _, r := range responses {
			var ids []string
			require.NoError(t, json.Unmarshal(r.InputIDs, &ids))
			for _, in := range ids {
				answered[in] = true
			}
		}
		return answered[first] && answered[second]
	})
	responses, err := s.st.ListResponsesBySession(s.ctx, id)
	require.NoError(t, err)
	require.NotEmpty(t, responses)
	for _, r := range responses {
		require.NotNil(t, r.Outcome)
		require.Equal(t, store.OutcomeCompleted, *r.Outcome, "response %s", r.ResponseID)
	}
	for _, in := range []string{first, second} {
		got, err := s.st.GetInputByID(s.ctx, in)
		require.NoError(t, err)
		require.Equal(t, store.InputAdmitted, got.State)
	}
	s.requireGaplessLog(id)
	require.True(t, slices.ContainsFunc(s.parts(id), func(p store.OutputPart) bool {
		var f struct{ Type, Delta string }
		_ = json.Unmarshal(p.Frame, &f)
		return f.Type == "text-delta" && f.Delta != ""
	}), "Claude Code's text reached the output log")
	// The activation saved what ran: the Claude Code version it reported.
	info := s.requireRuntimeInfo(id)
	require.NotNil(t, info.RuntimeVersions)
	require.Len(t, info.RuntimeVersions.Components, 1)
	require.Equal(t, "claude_code", info.RuntimeVersions.Components[0].Component)
	require.NotNil(t, info.RuntimeVersions.Components[0].Version)
	require.Equal(t, agentbin.ClaudeVersion, *info.RuntimeVersions.Components[0].Version)
}

// TestClaudeCodeRemovedBoxFailsTheResponseAndResumesTheConversation removes the box
// while Claude Code streams: the open response ends failed (runtime_lost), and the next
// message resumes the same Claude conversation (--resume of its restored transcript)
// in a new box.
func TestClaudeCodeRemovedBoxFailsTheResponseAndResumesTheConversation(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	hello := s.send(id, "hello")
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
	s.eventually("the next message answered in a new box", func() bool { return s.admittedAndIdle(id, again) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID)
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same Claude conversation")
	s.requireGaplessLog(id)
}

// admittedAndIdle reports whether the input was admitted and the Session is READY.
func (s *stack) admittedAndIdle(sessionID, inputID string) bool {
	in, err := s.st.GetInputByID(s.ctx, inputID)
	require.NoError(s.t, err)
	f, err := s.st.GetSessionFactsByID(s.ctx, sessionID)
	require.NoError(s.t, err)
	return in.State == store.InputAdmitted && f.State() == store.StateReady
}

// TestClaudeCodeWorkerKilledWhileStreamingContinuesFromTheRecordedCursor stops the
// worker holding Claude Code's connection mid-response; another worker reconnects to
// the same box and process and continues from the recorded cursor.
func TestClaudeCodeWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	s := newClaudeStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()

	const chunks = 30
	in := s.send(id, devmodel.Directive("slow", "chunks", strconv.Itoa(chunks), "delay", "200ms"))
	s.eventually("streaming to be under way", func() bool { return strings.Count(s.text(id), "Slow chunk") >= 3 })
	stopA()
	require.Less(t, strings.Count(s.text(id), "Slow chunk"), chunks, "the response was still streaming")
	s.startWorker("host-b-" + uniq())

	s.eventually("the response to finish", func() bool { return s.admittedAndIdle(id, in) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	s.requireSlowChunksOnce(id, chunks)
	s.requireGaplessLog(id)
	require.Equal(t, int64(1), s.session(id).RuntimeGeneration, "the same box: a lost connection is not a lost box")
}

// requireSlowChunksOnce checks the Session's text holds each of a slow reply's chunks
// exactly once, in order: nothing lost or repeated across a fault.
func (s *stack) requireSlowChunksOnce(sessionID string, chunks int) {
	s.t.Helper()
	text := s.text(sessionID)
	at := 0
	for i := 1; i <= chunks; i++ {
		chunk := fmt.Sprintf("Slow chunk %d of %d.", i, chunks)
		require.Equal(s.t, 1, strings.Count(text, chunk), "%q once in %q", chunk, text)
		next := strings.Index(text, chunk)
		require.Greater(s.t, next, at-1, "in order")
		at = next
	}
}

// text concatenates every text delta of the Session's output log.
func (s *stack) text(sessionID string) string {
	var b strings.Builder
	for _, p := range s.parts(sessionID) {
		var f struct{ Type, Delta string }
		require.NoError(s.t, json.Unmarshal(p.Frame, &f))
		if f.Type == "text-delta" {
			b.WriteString(f.Delta)
		}
	}
	return b.String()
}

// TestClaudeCodeInterruptStopsTheResponse interrupts Claude Code mid-response: the
// response ends as Claude reports it (cancelled), and the Session stays usable.
func TestClaudeCodeInterruptStopsTheResponse(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	s.send(id, devmodel.Directive("slow", "chunks", "200", "delay", "200ms"))
	s.eventually("streaming", func() bool { return strings.Count(s.text(id), "Slow chunk") >= 2 })
	s.signal(id, workflows.SignalInterrupt, workflows.Interrupt{RequestID: "r-" + uniq()})
	s.eventually("the response to end", func() bool {
		r, err := s.st.GetLastEndedResponse(s.ctx, id)
		return err == nil && r.Outcome != nil
	})
	r, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCancelled, *r.Outcome, "native_reason %v", r.NativeReason)
	require.Less(t, strings.Count(s.text(id), "Slow chunk"), 200)

	next := s.send(id, "hello after the interrupt")
	s.eventually("the next message answered", func() bool { return s.admittedAndIdle(id, next) })
	last, err := s.st.GetLastEndedResponse(s.ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCompleted, *last.Outcome)
	s.requireGaplessLog(id)
}
