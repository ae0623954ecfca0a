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

// reader runs one reader's Events loop and hands its events over a channel.
type reader struct {
	t      *testing.T
	cancel context.CancelFunc
	events chan engines.Event
	errs   chan error
	seen   []engines.Event
	// reconciled are the parts the platform adds after this reader's, when it ends a
	// response the runtime lost.
	reconciled []engines.Frame
}

func startReader(t *testing.T, ctx context.Context, c engines.RuntimeClient, after *engines.RuntimeCursor) *reader {
	rctx, cancel := context.WithCancel(ctx)
	r := &reader{t: t, cancel: cancel, events: make(chan engines.Event, 4096), errs: make(chan error, 1)}
	go func() {
		for ev, err := range c.Events(rctx, after) {
			if err != nil {
				r.errs <- err
				return
			}
			r.events <- ev
		}
	}()
	t.Cleanup(cancel)
	return r
}

// until reads events until match returns true and returns that event.
func (r *reader) until(what string, match func(engines.Event) bool) engines.Event {
	r.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case ev := <-r.events:
			r.seen = append(r.seen, ev)
			if match(ev) {
				return ev
			}
		case err := <-r.errs:
			r.t.Fatalf("waiting for %s: events ended: %v", what, err)
		case <-timeout:
			r.t.Fatalf("waiting for %s: no such event", what)
		}
	}
}

func isType(typ engines.EventType) func(engines.Event) bool {
	return func(ev engines.Event) bool { return ev.Type() == typ }
}

func isFrame(typ string) func(engines.Event) bool {
	return func(ev engines.Event) bool {
		out, ok := ev.(engines.ResponseOutput)
		return ok && out.Frame.Type() == typ
	}
}

func ended(r *reader) engines.ResponseEnded {
	return r.until("response end", isType(engines.EventResponseEnded)).(engines.ResponseEnded)
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
	var readers []*reader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *reader {
		rd := startReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// Two inputs in one conversation, the second sent while the first streams.
	first, second := uuidFor(t), uuidFor(t)
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=8]]")))
	r.until("first text delta", isFrame("text-delta"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")), "submit is idempotent")
	end1, end2 := ended(r), ended(r)
	require.Equal(t, engines.OutcomeCompleted, end1.Outcome)
	require.Equal(t, engines.OutcomeCompleted, end2.Outcome)
	admitted := map[string]bool{}
	for _, ev := range r.seen {
		if a, ok := ev.(engines.InputAdmitted); ok {
			admitted[a.InputID] = true
		}
	}
	for !admitted[first] || !admitted[second] {
		// Claude's batched writer may land the user lines after the reply streamed.
		a := r.until("both inputs admitted", isType(engines.EventInputAdmitted)).(engines.InputAdmitted)
		require.False(t, admitted[a.InputID], "admitted once")
		admitted[a.InputID] = true
	}

	// Interrupt while text streams.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "[[script:slow chunks=60]]")))
	r.until("streaming text", isFrame("text-delta"))
	require.NoError(t, client.Interrupt(ctx, false))
	cancelled := ended(r)
	require.Equal(t, engines.OutcomeCancelled, cancelled.Outcome)
	require.Equal(t, "aborted_streaming", cancelled.NativeReason)

	// The permission mode follows the owner's choice, in Claude's words.
	setter := client.(engines.PermissionModeSetter)
	require.NoError(t, setter.SetPermissionMode(ctx, "plan"))
	require.NoError(t, setter.SetPermissionMode(ctx, "default"))
	require.Error(t, setter.SetPermissionMode(ctx, "manual"), "an alias is not a mode of its own")

	// An approval answered after the reader reconnects from its stored cursor.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), `[[script:bash cmd="touch approved.txt"]]`)))
	opened := r.until("approval", isType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.cancel()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial = engines.AttachReconnect, key, rt.ResumeMaterial
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	closed := r.until("approval closed", isType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, ended(r).Outcome)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "a redelivered answer is accepted")
	_, err = box.ReadFile(ctx, nil, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")

	// The process killed mid-response, then the same conversation resumed.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "[[script:slow chunks=60]]")))
	killed := r.until("streaming before the kill", isFrame("text-delta")).(engines.ResponseOutput).ResponseID
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.(*claude.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	select {
	case err := <-r.errs:
		require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
		// What the platform does on reconciliation once the runtime is confirmed lost.
		r.reconciled = engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: killed,
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
	killedAt := r.seen[len(r.seen)-1].EventCursor()
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
	require.Equal(t, engines.OutcomeCompleted, ended(r).Outcome)
	admits := func(ev engines.Event) bool {
		a, ok := ev.(engines.InputAdmitted)
		return ok && a.InputID == afterKill
	}
	if !slices.ContainsFunc(r.seen, admits) {
		r.until("admission after the kill", admits)
	}
	// With every input admitted the transcript no longer changes what is translated:
	// the real journal reads back the same from every cursor.
	enginetest.CheckClientCursorDeterminism(t, client, len(r.seen), 30*time.Second)

	// The box removed; the conversation resumes in a new box from the mirrored transcript.
	paths := e.adapter.PathsFor(sc)
	transcriptPath := claude.TranscriptPath(paths.ConfigDir, paths.WorkDir, key)
	mirror := &memoryMirror{entries: map[string][]claude.TranscriptEntry{}}
	_, err = claude.MirrorTranscript(ctx, client.(*claude.Client), mirror, 0)
	require.NoError(t, err)
	entries, err := mirror.LoadTranscript(ctx, key)
	require.NoError(t, err)
	r.cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	require.NoError(t, claude.RestoreTranscript(ctx, box2, nil, transcriptPath, entries))
	sc4 := sc
	sc4.SandboxID, sc4.AttachMode, sc4.ResumeSessionKey = box2.ID(), engines.AttachRestore, key
	rt4, err := e.adapter.ActivateRuntime(ctx, sc4, box2)
	require.NoError(t, err)
	client = rt4.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "in the new box")))
	require.Equal(t, engines.OutcomeCompleted, ended(r).Outcome)
	last := e.model.Requests()[len(e.model.Requests())-1]
	require.True(t, bytes.Contains(last.Body, []byte("second while streaming")), "the model saw the earlier conversation")

	// The parts every reader relayed, each resuming where the last one's record ends,
	// make one stream a browser accepts: nothing repeated, nothing missing.
	var frames []engines.Frame
	for _, rd := range readers {
		for _, ev := range rd.seen {
			if out, ok := ev.(engines.ResponseOutput); ok {
				frames = append(frames, out.Frame)
			}
		}
		frames = append(frames, rd.reconciled...)
	}
	report := uicheck.RequireValidChunks(t, frames)
	require.Len(t, report.Messages, 7, "one message per response: two, interrupted, approved, lost, after the kill, in the new box")
}
