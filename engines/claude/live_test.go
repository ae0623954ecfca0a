package claude_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
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

// liveEnv is the real pinned Claude Code in real local boxes, reaching the in-process
// scripted model through the host-side credential proxy, as in notes/claude-in-a-box.md.
type liveEnv struct {
	t       *testing.T
	ctx     context.Context
	model   *devmodel.Server
	backend *local.Backend
	// opts open another backend on the same boxes, as a restarted worker does.
	opts    local.Options
	adapter *claude.Adapter
	spec    sandbox.Spec
}

const modelPort = 18080

func newLiveEnv(t *testing.T) *liveEnv {
	localtest.RequireBoxes(t)
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "run `make deps-agents`")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)

	model := devmodel.New(devmodel.Options{SlowDelay: 150 * time.Millisecond})
	require.NoError(t, model.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	opts := localtest.Options(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL(), Headers: map[string]string{"x-api-key": "sk-host-side"}}}
	backend := localtest.NewBackend(t, opts)
	return &liveEnv{
		t: t, ctx: ctx, model: model, backend: backend, opts: opts,
		adapter: claude.NewAdapter(claude.Config{Command: []string{"/opt/claude/" + baseName(prog.Command[0])}}),
		spec: sandbox.Spec{
			Mounts: []sandbox.Mount{{Source: prog.Dir, Target: "/opt/claude"}},
			Env: map[string]string{
				"ANTHROPIC_BASE_URL": "http://127.0.0.1:18080", "ANTHROPIC_API_KEY": "placeholder",
			},
			Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: modelPort}}},
		},
	}
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func (e *liveEnv) newBox() (sandbox.Handle, *enginebox.Box) {
	h, err := e.backend.Create(e.ctx, e.spec)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = h.Close() })
	return h, enginebox.New(h)
}

func uuidFor(t *testing.T) string {
	t.Helper()
	return claudeUUID()
}

// TestLiveConversationInABox drives the real Claude Code in a real box through the
// whole lifecycle: two inputs (one while the first streams), an interrupt, an approval
// answered after the reader reconnects, a killed process resumed, and the conversation
// resumed in a new box from its mirrored transcript.
func TestLiveConversationInABox(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	key := client.EngineSessionKey()
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Validate())
	require.Equal(t, agentbin.ClaudeVersion, *info.RuntimeVersions.Components[0].Version, "the version Claude Code reports itself")
	var readers []*enginetest.LiveReader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *enginetest.LiveReader {
		rd := enginetest.StartLiveReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// Two inputs in one conversation, the second sent while the first streams.
	first, second := uuidFor(t), uuidFor(t)
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=8]]")))
	r.Until("first text delta", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")), "submit is idempotent")
	end1, end2 := r.Ended(), r.Ended()
	require.Equal(t, engines.OutcomeCompleted, end1.Outcome)
	require.Equal(t, engines.OutcomeCompleted, end2.Outcome)
	admitted := map[string]bool{}
	for _, ev := range r.Seen {
		if a, ok := ev.(engines.InputAdmitted); ok {
			admitted[a.InputID] = true
		}
	}
	for !admitted[first] || !admitted[second] {
		// Claude's batched writer may land the user lines after the reply streamed.
		a := r.Until("both inputs admitted", enginetest.IsType(engines.EventInputAdmitted)).(engines.InputAdmitted)
		require.False(t, admitted[a.InputID], "admitted once")
		admitted[a.InputID] = true
	}

	// Interrupt while text streams.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "[[script:slow chunks=60]]")))
	r.Until("streaming text", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Interrupt(ctx, false))
	cancelled := r.Ended()
	require.Equal(t, engines.OutcomeCancelled, cancelled.Outcome)
	require.Equal(t, "aborted_streaming", cancelled.NativeReason)

	// The permission mode follows the owner's choice, in Claude's words.
	setter := client.(engines.PermissionModeSetter)
	require.NoError(t, setter.SetPermissionMode(ctx, "plan"))
	require.NoError(t, setter.SetPermissionMode(ctx, "default"))
	require.Error(t, setter.SetPermissionMode(ctx, "manual"), "an alias is not a mode of its own")

	// An approval answered after the reader reconnects from its stored cursor.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), `[[script:bash cmd="touch approved.txt"]]`)))
	opened := r.Until("approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.Cancel()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial = engines.AttachReconnect, key, rt.ResumeMaterial
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	closed := r.Until("approval closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "a redelivered answer is accepted")
	_, err = box.ReadFile(ctx, nil, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")

	// The process killed mid-response, then the same conversation resumed.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "[[script:slow chunks=60]]")))
	killed := r.Until("streaming before the kill", enginetest.IsFrame("text-delta")).(engines.ResponseOutput).ResponseID
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.(*claude.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	select {
	case err := <-r.Errs:
		require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
		// What the platform does on reconciliation once the runtime is confirmed lost.
		r.Reconciled = engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: killed,
			Outcome: engines.OutcomeFailed, NativeReason: engines.NativeReasonRuntimeLost})
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not see the process end")
	}
	sc3 := sc2
	sc3.ResumeMaterial = rt2.ResumeMaterial
	rt3, err := e.adapter.ActivateRuntime(ctx, sc3, box)
	require.NoError(t, err)
	client = rt3.EngineClient
	require.Equal(t, key, client.EngineSessionKey(), "the killed conversation resumes, not a new one")
	killedAt := r.Seen[len(r.Seen)-1].EventCursor()
	for _, err := range client.Events(ctx, &killedAt) {
		require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired, "the killed process's cursor does not resume on the new one")
		break
	}
	st, err := client.State(ctx)
	require.NoError(t, err)
	require.Empty(t, st.OpenResponses, "the new process reports no open response: the platform ends the lost one as runtime_lost")
	r = start(client, nil)
	afterKill := uuidFor(t)
	require.NoError(t, client.Submit(ctx, engines.TextInput(afterKill, "after the kill")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admits := func(ev engines.Event) bool {
		a, ok := ev.(engines.InputAdmitted)
		return ok && a.InputID == afterKill
	}
	if !slices.ContainsFunc(r.Seen, admits) {
		r.Until("admission after the kill", admits)
	}
	// With every input admitted the transcript no longer changes what is translated:
	// the real journal reads back the same from every cursor.
	enginetest.CheckClientCursorDeterminism(t, client, len(r.Seen), 30*time.Second)

	// The box removed; the conversation resumes in a new box from the mirrored transcript.
	paths := e.adapter.PathsFor(sc)
	transcriptPath := claude.TranscriptPath(paths.ConfigDir, paths.WorkDir, key)
	transcript, err := box.ReadFile(ctx, nil, transcriptPath)
	require.NoError(t, err)
	r.Cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	require.NoError(t, box2.WriteFile(ctx, nil, transcriptPath, transcript, 0o600))
	sc4 := sc
	sc4.SandboxID, sc4.AttachMode, sc4.ResumeSessionKey = box2.ID(), engines.AttachRestore, key
	rt4, err := e.adapter.ActivateRuntime(ctx, sc4, box2)
	require.NoError(t, err)
	client = rt4.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "in the new box")))
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
	require.Len(t, report.Messages, 7, "one message per response: two, interrupted, approved, lost, after the kill, in the new box")
}
