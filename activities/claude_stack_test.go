package activities_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/workflows"
)

// These tests run the orchestration scenarios against the real Claude Code: the
// pinned release bound into real local boxes, reaching the in-process scripted model
// server through the box's "model" egress forward, as the platform wires it.

// claudeMount is where the pinned Claude Code release is bound inside every box.
const claudeMount = "/opt/astrabox/claude"

// claudeStack is a stack whose Agent runs Claude Code against the scripted model.
type claudeStack struct {
	*stack
	model *devmodel.Server
}

func newClaudeStack(t *testing.T) *claudeStack {
	t.Helper()
	if testing.Short() {
		t.Skip("orchestration integration tests need PostgreSQL, Temporal, boxes and Claude Code")
	}
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "run `make deps-agents`")
	rel, err := filepath.Rel(prog.Dir, prog.Command[0])
	require.NoError(t, err)
	command := append([]string{path.Join(claudeMount, filepath.ToSlash(rel))}, prog.Command[1:]...)

	model := devmodel.New(devmodel.Options{})
	require.NoError(t, model.Start(context.Background(), "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	upstream, err := url.Parse(model.URL())
	require.NoError(t, err)
	s := newStack(t, func(o *local.Options) {
		// The host side of the box's model forward adds the credential, as the platform's does.
		o.Egress = map[string]http.Handler{activities.ModelForwardName: egress.NewCredentialProxy(upstream, map[string]string{"x-api-key": "sk-host-side"})}
	})
	require.NoError(t, s.engines.Register(claude.EngineKind, claude.NewAdapter(claude.Config{Command: command})))
	s.extendSpec = func(spec *sandbox.Spec, ad engines.EngineAdapter) {
		if ad.Capabilities().EngineKind != claude.EngineKind {
			return
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: prog.Dir, Target: claudeMount})
		activities.AddModelEgress(spec, ad.SandboxRequest())
	}
	profile, err := s.st.CreateRuntimeProfile(s.ctx, store.NewRuntimeProfile{Name: "claude-" + uniq(), EngineKind: claude.EngineKind, Enabled: true, SandboxBackend: store.SandboxLocal})
	require.NoError(t, err)
	s.agent, err = s.st.CreateAgent(s.ctx, store.NewAgent{Name: "claude-" + uniq(), EngineKind: claude.EngineKind, RuntimeProfileID: profile.ID})
	require.NoError(t, err)
	return &claudeStack{stack: s, model: model}
}

// responseOf returns the response that answers input, once the runtime reported it.
// Claude names its responses itself; the input ids it records tie them to inputs.
func (s *claudeStack) responseOf(sessionID, input string) (store.ResponseRecord, bool) {
	s.t.Helper()
	rs, err := s.st.ListResponses(s.ctx, sessionID)
	require.NoError(s.t, err)
	for _, r := range rs {
		if slices.Contains(inputIDs(s.t, r), input) {
			return r, true
		}
	}
	return store.ResponseRecord{}, false
}

// waitAnswered waits until the response answering input has ended.
func (s *claudeStack) waitAnswered(sessionID, input string) store.ResponseRecord {
	s.t.Helper()
	var r store.ResponseRecord
	s.eventually("the response to "+input+" to end", func() bool {
		var ok bool
		r, ok = s.responseOf(sessionID, input)
		return ok && r.Outcome != nil
	})
	return r
}

// waitStreaming waits until the response answering input has streamed n text deltas
// and returns its id.
func (s *claudeStack) waitStreaming(sessionID, input string, n int) string {
	s.t.Helper()
	var id string
	s.eventually("streamed text", func() bool {
		r, ok := s.responseOf(sessionID, input)
		id = r.ResponseID
		return ok && len(s.deltas(sessionID, id)) >= n
	})
	return id
}

// sent is the model server's request for the newest prompt containing marker, once
// its reply has been sent whole.
func (s *claudeStack) sent(marker string) devmodel.Request {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	req, err := s.model.WaitFor(ctx, func(r devmodel.Request) bool {
		return strings.Contains(r.Prompt, marker) && r.Outcome == devmodel.OutcomeCompleted && r.ToolCall == ""
	})
	require.NoError(s.t, err, "no completed model reply to a prompt containing %q", marker)
	return req
}

func inputIDs(t testing.TB, r store.ResponseRecord) []string {
	var ids []string
	require.NoError(t, json.Unmarshal(r.InputIDs, &ids))
	return ids
}

func (s *claudeStack) waitState(sessionID, state string) {
	s.t.Helper()
	s.eventually("state "+state, func() bool {
		f, err := s.st.GetSessionFactsByID(s.ctx, sessionID)
		require.NoError(s.t, err)
		return f.State() == state
	})
}

func TestClaudeTwoInputsInOneConversationOneSentWhileWorking(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	marker := "first " + uniq()
	first := s.send(id, "[[script:slow chunks=20 delay=100ms]] "+marker)
	s.waitStreaming(id, first, 1)
	second := s.send(id, "second while working "+uniq()) // Claude queues it

	r1 := s.waitAnswered(id, first)
	r2 := s.waitAnswered(id, second)
	require.Equal(t, store.OutcomeCompleted, *r1.Outcome)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	if r1.ResponseID != r2.ResponseID {
		require.Less(t, *r1.EndedSeq, r2.StartedSeq, "answered in accepted order")
	}
	require.Equal(t, s.sent(marker).Reply, strings.Join(s.deltas(id, r1.ResponseID), ""))
	require.Contains(t, strings.Join(s.deltas(id, r2.ResponseID), ""), "Scripted reply to: second while working")
	for _, in := range []string{first, second} {
		// Claude writes its user lines in batches, so an admission may land after the reply.
		s.eventually("input "+in+" admitted", func() bool {
			got, err := s.st.GetInputByID(s.ctx, in)
			require.NoError(t, err)
			return got.State == store.InputAdmitted
		})
	}
	s.requireGaplessLog(id)
	s.waitState(id, store.StateReady)
}

func TestClaudeInterruptStopsTheResponseAndTheSessionStaysUsable(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	long := s.send(id, "[[script:slow chunks=200 delay=100ms]]")
	resp := s.waitStreaming(id, long, 2)
	s.signal(id, workflows.SignalInterrupt, workflows.Interrupt{RequestID: "r-" + uniq()})
	r := s.waitAnswered(id, long)
	require.Equal(t, store.OutcomeCancelled, *r.Outcome)
	require.Equal(t, "aborted_streaming", *r.NativeReason, "Claude's own word")
	require.Less(t, len(s.deltas(id, resp)), 200)

	next := s.send(id, "after the interrupt")
	r2 := s.waitAnswered(id, next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	require.Equal(t, "Scripted reply to: after the interrupt", strings.Join(s.deltas(id, r2.ResponseID), ""))
	s.requireGaplessLog(id)
}

func TestClaudeApprovalAnsweredAfterTheReaderReconnects(t *testing.T) {
	s := newClaudeStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()
	// In Claude's default mode a Bash call asks through can_use_tool.
	_, err := s.st.SaveSessionPermissionMode(s.ctx, id, "default")
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
	s.waitState(id, store.StateWaitingInput)
	stopA()
	s.startWorker("host-b-" + uniq())

	// What the API does: save the answer, then signal.
	answer, err := json.Marshal(engines.InteractionAnswer{Decision: engines.DecisionApprove})
	require.NoError(t, err)
	_, err = s.st.SaveAnswerIfOpen(s.ctx, id, interaction, answer, s.user.ID)
	require.NoError(t, err)
	s.signal(id, workflows.SignalInteractionAnswered, workflows.InteractionAnswered{InteractionID: interaction})

	r := s.waitAnswered(id, in)
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

func TestClaudeWorkerKilledWhileStreamingContinuesFromTheRecordedCursor(t *testing.T) {
	s := newClaudeStack(t)
	stopA := s.startWorker("host-a-" + uniq())
	id := s.newSession()

	const n = 60
	marker := uniq()
	in := s.send(id, "[[script:slow chunks=60 delay=100ms]] "+marker)
	resp := s.waitStreaming(id, in, 5)
	hostA := *s.session(id).HostTaskQueue
	stopA() // the process holding the connection goes away mid-response
	require.Less(t, len(s.deltas(id, resp)), n, "the response was still streaming")

	s.startWorker("host-b-" + uniq())
	r := s.waitAnswered(id, in)
	require.Equal(t, store.OutcomeCompleted, *r.Outcome)
	want := make([]string, n)
	for i := range want {
		want[i] = "Slow chunk " + strconv.Itoa(i+1) + " of 60. "
	}
	require.Equal(t, s.sent(marker).Reply, strings.Join(want, ""), "the model sent these chunks")
	require.Equal(t, want, s.deltas(id, resp), "no repeated and no missing part")
	s.requireGaplessLog(id)
	sess := s.session(id)
	require.NotEqual(t, hostA, *sess.HostTaskQueue, "another worker holds the connection now")
	require.Equal(t, int64(1), sess.RuntimeGeneration, "the same box and runtime: a lost connection is not a lost box")
}

func TestClaudeRemovedBoxFailsTheOpenResponseAndTheNextMessageResumesInANewBox(t *testing.T) {
	s := newClaudeStack(t)
	s.startWorker("host-a-" + uniq())
	id := s.newSession()

	earlier := "remember the word " + uniq()
	first := s.send(id, earlier)
	require.Equal(t, store.OutcomeCompleted, *s.waitAnswered(id, first).Outcome)
	long := s.send(id, "[[script:slow chunks=300 delay=100ms]]")
	s.waitStreaming(id, long, 2)
	before := s.session(id)
	require.NoError(t, s.backend.Destroy(s.ctx, *before.SandboxID))

	r := s.waitAnswered(id, long)
	require.Equal(t, store.OutcomeFailed, *r.Outcome)
	require.Equal(t, store.NativeReasonRuntimeLost, *r.NativeReason)
	parts := s.parts(id)
	require.JSONEq(t, `"finish"`, jsonField(t, parts[len(parts)-1].Frame, "type"), "the stream ends with the response's finish part")

	marker := "in the new box " + uniq()
	next := s.send(id, marker)
	r2 := s.waitAnswered(id, next)
	require.Equal(t, store.OutcomeCompleted, *r2.Outcome)
	after := s.session(id)
	require.NotEqual(t, *before.SandboxID, *after.SandboxID, "a new box")
	require.Equal(t, *before.EngineSessionKey, *after.EngineSessionKey, "the same native Claude conversation")
	require.Greater(t, after.RuntimeGeneration, before.RuntimeGeneration)
	require.Contains(t, string(s.sent(marker).Body), earlier, "the model saw the earlier turn")
	got, err := s.st.GetInputByID(s.ctx, long)
	require.NoError(t, err)
	require.Equal(t, store.InputAdmitted, got.State, "an admitted input is not sent again")
	s.requireGaplessLog(id)
}
