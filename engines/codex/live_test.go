package codex_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/codex"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// codexMount is where the live boxes see the pinned release's native build.
const codexMount = "/opt/codex"

// modelPort is the box's model forward; the host side adds the credential.
const modelPort = 18080

// liveEnv is the real pinned Codex in real local boxes, reaching the in-process
// scripted model through the host-side credential proxy, as in
// notes/codex-pi-in-a-box.md.
type liveEnv struct {
	t       *testing.T
	ctx     context.Context
	model   *devmodel.Server
	backend *local.Backend
	adapter *codex.Adapter
	// adapterConfig is what adapter was made with, for a test that needs a variant.
	adapterConfig codex.Config
	spec          sandbox.Spec
}

func newLiveEnv(t *testing.T) *liveEnv {
	localtest.RequireBoxes(t)
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Codex)
	require.NoError(t, err, "run `make deps-agents`")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)

	model := devmodel.New(devmodel.Options{SlowDelay: 150 * time.Millisecond})
	require.NoError(t, model.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	opts := localtest.Options(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL(), Headers: map[string]string{"Authorization": "Bearer sk-host-side"}}}
	backend := localtest.NewBackend(t, opts)
	rel, err := filepath.Rel(prog.Dir, prog.Command[0])
	require.NoError(t, err)
	cfg := codex.Config{
		Command: []string{filepath.Join(codexMount, rel)}, PathDirs: []string{filepath.Join(codexMount, "codex-path")},
		ModelBaseURL: "http://127.0.0.1:18080/v1", Model: "gpt-5.5",
	}
	return &liveEnv{
		t: t, ctx: ctx, model: model, backend: backend, adapter: codex.NewAdapter(cfg), adapterConfig: cfg,
		spec: sandbox.Spec{
			Mounts:  []sandbox.Mount{{Source: prog.Dir, Target: codexMount}},
			Env:     map[string]string{codex.ModelKeyEnv: "placeholder"},
			Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: modelPort}}},
		},
	}
}

func (e *liveEnv) newBox() (sandbox.Handle, *enginebox.Box) {
	h, err := e.backend.Create(e.ctx, e.spec)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = h.Close() })
	return h, enginebox.New(h)
}

func admittedOnce(r *enginetest.LiveReader, ids ...string) {
	r.T.Helper()
	admitted := map[string]bool{}
	for _, ev := range r.Seen {
		if a, ok := ev.(engines.InputAdmitted); ok && slices.Contains(ids, a.InputID) {
			require.False(r.T, admitted[a.InputID], "admitted once")
			admitted[a.InputID] = true
		}
	}
	for _, id := range ids {
		if !admitted[id] {
			r.Until("admission of "+id, func(ev engines.Event) bool {
				a, ok := ev.(engines.InputAdmitted)
				return ok && a.InputID == id
			})
		}
	}
}

// TestLiveConversationInABox drives the real Codex app-server in a real box through
// the whole lifecycle: two inputs (one while the first streams, joining its turn), an
// interrupt during a long command, approvals accepted after the reader reconnects and
// declined, a killed app-server resumed, and the thread resumed in a new box from its
// mirrored rollout.
func TestLiveConversationInABox(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "never"}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	key := client.EngineSessionKey()
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Validate())
	require.Equal(t, agentbin.CodexVersion, *info.RuntimeVersions.Components[0].Version, "the version Codex reports itself")
	var readers []*enginetest.LiveReader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *enginetest.LiveReader {
		rd := enginetest.StartLiveReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// Two inputs in one conversation, the second sent while the first streams: Codex
	// takes it into the running turn, so one response answers both.
	first, second := uuid.NewString(), uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=8]]")))
	r.Until("first text delta", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")), "submit is idempotent")
	joined := r.Until("the second input joins", func(ev engines.Event) bool {
		s, ok := ev.(engines.ResponseStarted)
		return ok && len(s.InputIDs) == 2
	}).(engines.ResponseStarted)
	require.Equal(t, []string{first, second}, joined.InputIDs)
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admittedOnce(r, first, second)

	// Interrupt during a long command.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="sleep 60"]]`)))
	r.Until("the command runs", enginetest.IsFrame("tool-input-available"))
	require.NoError(t, client.Interrupt(ctx, false))
	cancelled := r.Ended()
	require.Equal(t, engines.OutcomeCancelled, cancelled.Outcome)
	require.Equal(t, "interrupted", cancelled.NativeReason)

	// An approval under untrusted, answered after the reader reconnects from its
	// stored cursor.
	setter := client.(engines.PermissionModeSetter)
	require.NoError(t, setter.SetPermissionMode(ctx, "untrusted"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch approved.txt"]]`)))
	opened := r.Until("approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.Cancel()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial, sc2.PermissionMode = engines.AttachReconnect, key, rt.ResumeMaterial, "untrusted"
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	require.Equal(t, client.(*codex.Client).ProcessName(), rt.EngineClient.(*codex.Client).ProcessName(), "the running app-server is reattached")
	r = start(client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	closed := r.Until("approval closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "a redelivered answer is accepted")
	_, err = box.ReadFile(ctx, nil, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")

	// An approval declined: the command never runs.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch declined.txt"]]`)))
	opened = r.Until("second approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionDeny}))
	r.Until("the denied tool", enginetest.IsFrame("tool-output-denied"))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	_, err = box.ReadFile(ctx, nil, "/workspace/declined.txt")
	require.Error(t, err, "the declined command did not run")
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, "never"))

	// The app-server killed mid-response, then the same thread resumed.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), "[[script:slow chunks=60]]")))
	killed := r.Until("streaming before the kill", enginetest.IsFrame("text-delta")).(engines.ResponseOutput).ResponseID
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.(*codex.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	select {
	case err := <-r.Errs:
		require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
		// What the platform does on reconciliation once the runtime is confirmed lost.
		r.Reconciled = engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: killed,
			Outcome: engines.OutcomeFailed, NativeReason: engines.NativeReasonRuntimeLost})
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not see the app-server end")
	}
	sc3 := sc2
	sc3.ResumeMaterial, sc3.PermissionMode = rt2.ResumeMaterial, "never"
	rt3, err := e.adapter.ActivateRuntime(ctx, sc3, box)
	require.NoError(t, err)
	client = rt3.EngineClient
	require.Equal(t, key, client.EngineSessionKey(), "the killed thread resumes, not a new one")
	killedAt := r.Seen[len(r.Seen)-1].EventCursor()
	for _, err := range client.Events(ctx, &killedAt) {
		require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired, "the killed app-server's cursor does not resume on the new one")
		break
	}
	r = start(client, nil)
	afterKill := uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(afterKill, "after the kill")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admittedOnce(r, afterKill)
	enginetest.CheckClientCursorDeterminism(t, client, len(r.Seen), 30*time.Second)

	// The box removed; the thread resumes in a new box from the mirrored rollout, which
	// the platform restores at the same place (the session-log pattern's match).
	rollout := client.(*codex.Client).RolloutPath()
	matched, err := filepath.Match(filepath.Join("/workspace/.home/.codex", codex.RolloutPattern[:len(codex.RolloutPattern)-len("{engine_session_key}.jsonl")]+key+".jsonl"), rollout)
	require.NoError(t, err)
	require.True(t, matched, "the rollout %s matches the declared session log", rollout)
	data, err := box.ReadFile(ctx, nil, rollout)
	require.NoError(t, err)
	r.Cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	require.NoError(t, box2.WriteFile(ctx, nil, rollout, data, 0o600))
	sc4 := sc
	sc4.SandboxID, sc4.AttachMode, sc4.ResumeSessionKey = box2.ID(), engines.AttachRestore, key
	rt4, err := e.adapter.ActivateRuntime(ctx, sc4, box2)
	require.NoError(t, err)
	client = rt4.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), "in the new box")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	last := e.model.Requests()[len(e.model.Requests())-1]
	require.True(t, bytes.Contains(last.Body, []byte("second while streaming")), "the model saw the earlier conversation")

	// The parts every reader relayed, each resuming where the last one's record ends,
	// make one stream a browser accepts: nothing repeated, nothing missing.
	var frames []engines.Frame
	for _, rd := range readers {
		for _, ev := range rd.Seen {
			if out, ok := ev.(engines.ResponseOutput); ok {
				frames = append(frames, out.Frame)
			}
		}
		frames = append(frames, rd.Reconciled...)
	}
	report := uicheck.RequireValidChunks(t, frames)
	require.Len(t, report.Messages, 7, "one message per response: joined, interrupted, approved, declined, lost, after the kill, in the new box")
}

// TestLiveNeverWrittenThreadResumes keeps a conversation that never got a message: its
// app-server killed, then the box replaced, it resumes under the same thread id, and its
// first message is answered and admitted there. Codex writes a rollout only at a
// thread's first turn or when it is named; the adapter names every new thread.
func TestLiveNeverWrittenThreadResumes(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient.(*codex.Client)
	key := client.EngineSessionKey()
	rollout := client.RolloutPath()
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	require.NoError(t, client.Close())

	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial, sc2.ConversationEmpty = engines.AttachReconnect, key, rt.ResumeMaterial, true
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err, "a new app-server resumes the never-written thread")
	require.Equal(t, key, rt2.EngineClient.EngineSessionKey())
	data, err := box.ReadFile(ctx, nil, rollout)
	require.NoError(t, err)
	require.NoError(t, rt2.EngineClient.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))

	_, box2 := e.newBox()
	require.NoError(t, box2.WriteFile(ctx, nil, rollout, data, 0o600))
	sc3 := sc
	sc3.SandboxID, sc3.AttachMode, sc3.ResumeSessionKey, sc3.ConversationEmpty = box2.ID(), engines.AttachRestore, key, true
	rt3, err := e.adapter.ActivateRuntime(ctx, sc3, box2)
	require.NoError(t, err)
	c := rt3.EngineClient
	require.Equal(t, key, c.EngineSessionKey())
	r := enginetest.StartLiveReader(t, ctx, c, nil)
	in := uuid.NewString()
	require.NoError(t, c.Submit(ctx, engines.TextInput(in, "the first message, in the second box")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admittedOnce(r, in)
	st, err := c.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{in}, st.AdmittedInputIDs)
}
