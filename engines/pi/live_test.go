package pi_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/engines/pi"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// piMount is where the live boxes see the pinned release's node_modules: a folder
// named node_modules, where Node resolves Pi's dependencies.
const piMount = "/opt/pi/node_modules"

// modelPort is the box's model forward; the host side adds the credential.
const modelPort = 18080

// liveEnv is the real pinned Pi in real local boxes, reaching the in-process scripted
// model over Anthropic Messages through the host-side credential proxy, as in
// notes/codex-pi-in-a-box.md.
type liveEnv struct {
	t       *testing.T
	ctx     context.Context
	model   *devmodel.Server
	backend *local.Backend
	adapter *pi.Adapter
	spec    sandbox.Spec
}

func newLiveEnv(t *testing.T) *liveEnv {
	localtest.RequireBoxes(t)
	root, err := agentbin.Root()
	require.NoError(t, err)
	prog, err := agentbin.Locate(root, agentbin.Pi)
	require.NoError(t, err, "run `make deps-agents`")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)

	model := devmodel.New(devmodel.Options{SlowDelay: 150 * time.Millisecond})
	require.NoError(t, model.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	opts := localtest.Options(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL(), Headers: map[string]string{"x-api-key": "sk-host-side"}}}
	backend := localtest.NewBackend(t, opts)
	rel, err := filepath.Rel(prog.Dir, prog.Command[1])
	require.NoError(t, err)
	return &liveEnv{
		t: t, ctx: ctx, model: model, backend: backend,
		adapter: pi.NewAdapter(pi.Config{
			Command: []string{prog.Command[0], filepath.Join(piMount, rel)}, Version: prog.Version,
			ModelBaseURL: "http://127.0.0.1:18080", Model: "devmodel",
		}),
		spec: sandbox.Spec{
			Mounts:  []sandbox.Mount{{Source: prog.Dir, Target: piMount}},
			Env:     map[string]string{pi.ModelKeyEnv: "placeholder"},
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

// admittedOnce waits until each input is admitted and checks none was admitted twice
// by this reader.
func admittedOnce(r *enginetest.LiveReader, ids ...string) {
	r.T.Helper()
	count := func() map[string]int {
		n := map[string]int{}
		for _, ev := range r.Seen {
			if a, ok := ev.(engines.InputAdmitted); ok {
				n[a.InputID]++
			}
		}
		return n
	}
	for _, id := range ids {
		if count()[id] == 0 {
			r.Until("admission of "+id, func(ev engines.Event) bool {
				a, ok := ev.(engines.InputAdmitted)
				return ok && a.InputID == id
			})
		}
		require.Equal(r.T, 1, count()[id], "input %s admitted once", id)
	}
}

// userMessages counts the user messages with this text in the session file.
func userMessages(t *testing.T, ctx context.Context, box engines.Box, file, text string) int {
	data, err := box.ReadFile(ctx, nil, file)
	require.NoError(t, err)
	return strings.Count(string(data), `"role":"user","content":[{"type":"text","text":"`+text+`"}]`)
}

// TestLiveConversationInABox drives the real Pi in a real box through the whole
// lifecycle: two inputs (the second a steering message of the running run), a reader
// stopped mid-response resuming from its cursor, an interrupt during a long command,
// approvals allowed after the reader reconnects and denied, Pi killed mid-response
// and resumed on its session file, Pi killed while it holds a queued message (answered
// after recovery exactly once), and the conversation resumed in a new box from its
// mirrored session file.
func TestLiveConversationInABox(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: pi.ModeAllowAll}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	key := client.EngineSessionKey()
	file := client.(*pi.Client).SessionFile()
	require.Equal(t, "/workspace/.home/.pi/sessions/"+key+".jsonl", file, "the platform chose the session file")
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Validate())
	require.Equal(t, agentbin.PiVersion, *info.RuntimeVersions.Components[0].Version)
	var readers []*enginetest.LiveReader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *enginetest.LiveReader {
		rd := enginetest.StartLiveReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// Two inputs, the second sent while the first streams: Pi delivers it as a
	// steering message within the same run, so one response answers both. The reader
	// is stopped mid-response and a new one resumes from its last cursor.
	first, second := uuid.NewString(), uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=12]]")))
	r.Until("first text delta", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while streaming")), "submit is idempotent")
	r.Until("another text delta", enginetest.IsFrame("text-delta"))
	r.Stop()
	resumeAt := r.Seen[len(r.Seen)-1].EventCursor()
	r = start(client, &resumeAt)
	joined := r.Until("the second input joins", func(ev engines.Event) bool {
		s, ok := ev.(engines.ResponseStarted)
		return ok && len(s.InputIDs) == 2
	}).(engines.ResponseStarted)
	require.Equal(t, []string{first, second}, joined.InputIDs)
	done := r.Ended()
	require.Equal(t, engines.OutcomeCompleted, done.Outcome)
	require.Equal(t, "stop", done.NativeReason)
	all := append(slices.Clone(readers[0].Seen), r.Seen...)
	admittedOnce(&enginetest.LiveReader{T: t, Seen: all, Events: r.Events, Errs: r.Errs}, first, second)
	require.Equal(t, "devmodel", client.(*pi.Client).ModelName())

	// Interrupt during a long command.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="sleep 60"]]`)))
	r.Until("the command runs", enginetest.IsFrame("tool-input-available"))
	require.NoError(t, client.Interrupt(ctx, false))
	cancelled := r.Ended()
	require.Equal(t, engines.OutcomeCancelled, cancelled.Outcome)
	require.Equal(t, "aborted", cancelled.NativeReason)

	// An approval under ask, answered after the reader reconnects from its stored
	// cursor through a new client on the running Pi.
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, pi.ModeAsk))
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch approved.txt"]]`)))
	opened := r.Until("approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.Stop()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial, sc2.PermissionMode = engines.AttachReconnect, key, rt.ResumeMaterial, pi.ModeAsk
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	require.Equal(t, rt.EngineClient.(*pi.Client).ProcessName(), client.(*pi.Client).ProcessName(), "the running Pi is reattached")
	r = start(client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	closed := r.Until("approval closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "a redelivered answer is accepted")
	_, err = box.ReadFile(ctx, nil, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")

	// An approval denied: the command never runs.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch declined.txt"]]`)))
	opened = r.Until("second approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionDeny}))
	r.Until("the denied tool", enginetest.IsFrame("tool-output-denied"))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	_, err = box.ReadFile(ctx, nil, "/workspace/declined.txt")
	require.Error(t, err, "the denied command did not run")
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, pi.ModeAllowAll))

	// Pi killed mid-response while it holds a queued (steering) message in memory: the
	// message is not admitted, so the platform keeps it and hands it to the Pi that
	// resumes the session file, which answers it exactly once.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), "[[script:slow chunks=200]]")))
	killed := r.Until("streaming before the kill", enginetest.IsFrame("text-delta")).(engines.ResponseOutput).ResponseID
	queued := uuid.NewString()
	const queuedText = "queued before the kill"
	require.NoError(t, client.Submit(ctx, engines.TextInput(queued, queuedText)))
	require.Eventually(t, func() bool {
		st, err := client.State(ctx)
		return err == nil && slices.Contains(st.QueuedInputIDs, queued)
	}, 30*time.Second, 50*time.Millisecond, "Pi holds the message in its queue")
	st, err := client.State(ctx)
	require.NoError(t, err)
	require.NotContains(t, st.AdmittedInputIDs, queued, "a queued message is not admitted")
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: client.(*pi.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	select {
	case err := <-r.Errs:
		require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
		r.Reconciled = engines.ResponseEndFrames(engines.ResponseEnded{ResponseID: killed,
			Outcome: engines.OutcomeFailed, NativeReason: engines.NativeReasonRuntimeLost})
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not see Pi end")
	}
	require.Zero(t, userMessages(t, ctx, box, file, queuedText), "Pi lost the queued message with its memory")
	sc3 := sc2
	sc3.ResumeMaterial, sc3.PermissionMode = rt2.ResumeMaterial, pi.ModeAllowAll
	rt3, err := e.adapter.ActivateRuntime(ctx, sc3, box)
	require.NoError(t, err)
	client = rt3.EngineClient
	require.Equal(t, key, client.EngineSessionKey(), "the killed conversation resumes, not a new one")
	require.NotEqual(t, rt2.EngineClient.(*pi.Client).ProcessName(), client.(*pi.Client).ProcessName())
	killedAt := readers[len(readers)-1].Seen[len(readers[len(readers)-1].Seen)-1].EventCursor()
	for _, err := range client.Events(ctx, &killedAt) {
		require.ErrorIs(t, err, engines.ErrRuntimeCursorExpired, "the killed Pi's cursor does not resume on the new one")
		break
	}
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(queued, queuedText)), "the platform hands over the unadmitted input")
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admittedOnce(r, queued)
	require.Equal(t, 1, userMessages(t, ctx, box, file, queuedText), "answered exactly once")
	enginetest.CheckClientCursorDeterminism(t, client, len(r.Seen), 30*time.Second)

	// The box removed; the conversation resumes in a new box from the mirrored session
	// file, which the platform restores at the same place.
	data, err := box.ReadFile(ctx, nil, file)
	require.NoError(t, err)
	r.Stop()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	require.NoError(t, box2.WriteFile(ctx, nil, file, data, 0o600))
	sc4 := sc
	sc4.SandboxID, sc4.AttachMode, sc4.ResumeSessionKey = box2.ID(), engines.AttachRestore, key
	rt4, err := e.adapter.ActivateRuntime(ctx, sc4, box2)
	require.NoError(t, err)
	client = rt4.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), "in the new box")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	require.True(t, bytes.Contains(last.Body, []byte("second while streaming")), "the model saw the earlier conversation")
	require.True(t, bytes.Contains(last.Body, []byte(queuedText)), "and the message answered after recovery")

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
	require.Len(t, report.Messages, 7, "one message per response: joined, interrupted, allowed, denied, lost, after recovery, in the new box")
}

// TestLiveActivationRefusesALostConversation: an attach whose session file is gone,
// with evidence the conversation had content, fails rather than binding the Session
// to an empty conversation.
func TestLiveActivationRefusesALostConversation(t *testing.T) {
	e := newLiveEnv(t)
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), AttachMode: engines.AttachRestore, ResumeSessionKey: uuid.NewString()}
	_, err := e.adapter.ActivateRuntime(e.ctx, sc, box)
	require.ErrorContains(t, err, "is missing")
}

// TestLiveAgentConfigurationReachesPi: the Agent's Skill and standing instructions are
// written into Pi's agent folder before Pi starts, and Pi hands both to the model.
func TestLiveAgentConfigurationReachesPi(t *testing.T) {
	e := newLiveEnv(t)
	_, box := e.newBox()
	const skillDescription = "Writes release notes from the merged changes."
	tag := uuid.NewString()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: pi.ModeAllowAll,
		AgentConfig: engines.AgentConfig{
			Skills: []engines.SkillConfig{{Name: "release-notes", Description: skillDescription,
				Instructions: "List every merged change in one line."}},
			Instructions: "Standing instruction " + tag + ": answer briefly.",
		}}
	rt, err := e.adapter.ActivateRuntime(e.ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	r := enginetest.StartLiveReader(t, e.ctx, client, nil)
	require.NoError(t, client.Submit(e.ctx, engines.TextInput(uuid.NewString(), "hello")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)

	var listed, instructed bool
	for _, req := range e.model.Requests() {
		listed = listed || (bytes.Contains(req.Body, []byte("release-notes")) && bytes.Contains(req.Body, []byte(skillDescription)))
		instructed = instructed || bytes.Contains(req.Body, []byte("Standing instruction "+tag))
	}
	require.True(t, listed, "Pi listed the Agent's Skill to the model")
	require.True(t, instructed, "the Agent's instructions reached the model")
	require.NoError(t, client.Close())
}
