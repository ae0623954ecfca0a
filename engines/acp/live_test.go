package acp_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
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

// Where live boxes see the installs.
const (
	acpMount    = "/opt/acp/node_modules"
	claudeMount = "/opt/claude"
	codexMount  = "/opt/codex"
	modelPort   = 18080
)

// liveEnv is one shipped ACP program in real local boxes, reaching the in-process
// scripted model through the host-side credential proxy.
type liveEnv struct {
	t       *testing.T
	ctx     context.Context
	model   *devmodel.Server
	backend *local.Backend
	adapter *acp.Adapter
	spec    sandbox.Spec
}

// liveProfiles are the shipped profiles the live test drives, with the model API each
// speaks and what its scripted conversation can show.
var liveProfiles = map[string]struct {
	profile func(acp.Install) acp.Profile
	// header is the credential header the host side adds.
	header, headerValue string
	// baseURL is the model base URL inside the box.
	baseURL string
	// askMode is a mode in which a shell command asks permission, and askArgs what
	// the scripted command adds to make the program ask.
	askMode, askArgs string
}{
	acp.KindClaude: {acp.ClaudeProfile, "x-api-key", "sk-host-side", "http://127.0.0.1:18080", "default", ""},
	// Codex asks under on-request only for a command that wants out of its sandbox.
	acp.KindCodex: {acp.CodexProfile, "Authorization", "Bearer sk-host-side", "http://127.0.0.1:18080/v1", "read-only", " escalate=true"},
	acp.KindQwen:  {acp.QwenProfile, "Authorization", "Bearer sk-host-side", "http://127.0.0.1:18080/v1", "default", ""},
	// opencode asks for every shell command (its configuration); it has no modes.
	acp.KindOpencode: {acp.OpencodeProfile, "Authorization", "Bearer sk-host-side", "http://127.0.0.1:18080/v1", "", ""},
	// Gemini CLI speaks the Gemini API, whose SDK adds /v1beta to the base URL.
	acp.KindGemini: {acp.GeminiProfile, "x-goog-api-key", "sk-host-side", "http://127.0.0.1:18080", "default", ""},
}

func newLiveEnv(t *testing.T, kind string) *liveEnv {
	localtest.RequireBoxes(t)
	lp := liveProfiles[kind]
	root, err := agentbin.Root()
	require.NoError(t, err)
	inst, err := agentbin.LocateACP(root)
	require.NoError(t, err, "run `make deps-acp-agents`")
	claudeProg, err := agentbin.Locate(root, agentbin.Claude)
	require.NoError(t, err, "run `make deps-agents`")
	codexProg, err := agentbin.Locate(root, agentbin.Codex)
	require.NoError(t, err, "run `make deps-agents`")
	codexRel, err := filepath.Rel(codexProg.Dir, codexProg.Command[0])
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	model := devmodel.New(devmodel.Options{SlowDelay: 150 * time.Millisecond})
	require.NoError(t, model.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	opts := localtest.Options(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL(), Headers: map[string]string{lp.header: lp.headerValue}}}
	backend := localtest.NewBackend(t, opts)
	profile := lp.profile(acp.Install{Node: inst.Node, Modules: acpMount, Opencode: filepath.Join(acpMount, inst.Opencode),
		ClaudeCode: claudeMount + "/" + filepath.Base(claudeProg.Command[0]), Codex: filepath.Join(codexMount, codexRel)})
	adapter, err := acp.NewAdapter(acp.Config{Profile: profile, ModelBaseURL: lp.baseURL})
	require.NoError(t, err)
	return &liveEnv{
		t: t, ctx: ctx, model: model, backend: backend, adapter: adapter,
		spec: sandbox.Spec{
			Mounts: []sandbox.Mount{{Source: inst.Modules, Target: acpMount}, {Source: claudeProg.Dir, Target: claudeMount},
				{Source: codexProg.Dir, Target: codexMount}},
			Env:     map[string]string{profile.ModelKeyEnv: "placeholder"},
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

func endedFor(r *enginetest.LiveReader, responseID string) engines.ResponseEnded {
	r.T.Helper()
	return r.Until("end of "+responseID, func(ev engines.Event) bool {
		e, ok := ev.(engines.ResponseEnded)
		return ok && (responseID == "" || e.ResponseID == responseID)
	}).(engines.ResponseEnded)
}

func startedFor(r *enginetest.LiveReader, inputID string) engines.ResponseStarted {
	r.T.Helper()
	return r.Until("response to "+inputID, func(ev engines.Event) bool {
		s, ok := ev.(engines.ResponseStarted)
		return ok && len(s.InputIDs) > 0 && s.InputIDs[len(s.InputIDs)-1] == inputID
	}).(engines.ResponseStarted)
}

func TestLiveClaudeACP(t *testing.T) { runLiveConversation(t, acp.KindClaude) }

// runLiveConversation drives one shipped ACP program in a real box through the
// lifecycle: two prompts, the second sent while the first streams; a cancel; a
// permission request answered after the reader reconnects; the session resumed in a
// new box from its mirrored transcript, with its history.
func runLiveConversation(t *testing.T, kind string) {
	e := newLiveEnv(t, kind)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	stateFiles := len(e.adapter.Profile().StateFiles) > 0
	if e.adapter.StartupMaterialRequest().RuntimeStateStorage {
		sc.CallbackCredentials = enginetest.NewMemoryRuntimeState().Credentials("session:" + sc.SessionID)
	}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	key := client.EngineSessionKey()
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Validate())
	require.NotNil(t, info.RuntimeVersions.Components[0].Version, "the version the program reports itself")
	var readers []*enginetest.LiveReader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *enginetest.LiveReader {
		rd := enginetest.StartLiveReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// Two prompts, the second while the first streams: each gets its own response.
	first, second := uuid.NewString(), uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=20]]")))
	firstResp := startedFor(r, first)
	r.Until("first text delta", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while busy")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while busy")), "submit is idempotent")
	messages := 5
	switch e.adapter.Profile().Busy {
	case acp.BusyQueued:
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, firstResp.ResponseID).Outcome)
		secondResp := startedFor(r, second)
		require.NotEqual(t, firstResp.ResponseID, secondResp.ResponseID)
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, secondResp.ResponseID).Outcome)
	case acp.BusyCancels:
		require.NotEqual(t, engines.OutcomeCompleted, endedFor(r, firstResp.ResponseID).Outcome, "the second prompt ends the first:\n%s", enginetest.LastEvents(r.Seen, 60))
		secondResp := startedFor(r, second)
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, secondResp.ResponseID).Outcome)
	case acp.BusyJoined:
		joined := startedFor(r, second)
		require.Equal(t, firstResp.ResponseID, joined.ResponseID, "the second prompt joins the running response")
		require.Equal(t, []string{first, second}, joined.InputIDs)
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, firstResp.ResponseID).Outcome)
		messages = 4
	}

	// Cancel while streaming.
	cancelled := uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(cancelled, "[[script:slow chunks=60]]")))
	r.Until("streaming before the cancel", enginetest.IsFrame("text-delta"))
	require.NoError(t, client.Interrupt(ctx, false))
	ended := endedFor(r, "")
	require.Equal(t, engines.OutcomeCancelled, ended.Outcome)
	require.Equal(t, "cancelled", ended.NativeReason)

	// A permission request answered after the reader reconnects from its stored cursor.
	if mode := liveProfiles[kind].askMode; mode != "" {
		require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, mode))
	}
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch approved.txt"`+liveProfiles[kind].askArgs+`]]`)))
	opened := r.Until("permission request", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.Cancel()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial, sc2.PermissionMode = engines.AttachReconnect, key, rt.ResumeMaterial, liveProfiles[kind].askMode
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	require.Equal(t, rt.EngineClient.(*acp.Client).ProcessName(), client.(*acp.Client).ProcessName(), "the running program is reattached")
	r = start(client, &stored)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	closed := r.Until("permission closed", enginetest.IsType(engines.EventInteractionClosed)).(engines.InteractionClosed)
	require.Equal(t, engines.ClosureAnswered, closed.Reason)
	require.Equal(t, engines.OutcomeCompleted, endedFor(r, opened.ResponseID).Outcome)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}), "a redelivered answer is accepted")
	_, err = box.ReadFile(ctx, nil, "/workspace/approved.txt")
	require.NoError(t, err, "the approved command ran")
	enginetest.CheckClientCursorDeterminism(t, client, len(r.Seen), 30*time.Second)

	if *record {
		writeRecording(t, ctx, box, client.(*acp.Client))
	}

	// The box removed; the session resumes in a new box from the mirrored transcript,
	// which the platform restores at the same place, or from the state files the client
	// saved into the platform's custody before the box went, which the adapter restores.
	var logs map[string][]byte
	if stateFiles {
		require.NoError(t, client.(engines.RuntimeStateSaver).SaveRuntimeState(ctx), "saved as before a release")
		require.False(t, client.IsLive(), "the program was stopped for a consistent copy")
	} else {
		logs = sessionLogs(t, ctx, box, e.adapter, key)
	}
	r.Cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	for p, data := range logs {
		require.NoError(t, box2.WriteFile(ctx, nil, p, data, 0o600))
	}
	sc3 := sc
	// The platform hands the stored resume material to every attach.
	sc3.SandboxID, sc3.AttachMode, sc3.ResumeSessionKey, sc3.ResumeMaterial = box2.ID(), engines.AttachRestore, key, rt2.ResumeMaterial
	rt3, err := e.adapter.ActivateRuntime(ctx, sc3, box2)
	require.NoError(t, err)
	client = rt3.EngineClient
	require.Equal(t, key, client.EngineSessionKey())
	r = start(client, nil)
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), "in the new box")))
	require.Equal(t, engines.OutcomeCompleted, endedFor(r, "").Outcome)
	e.requireModelSaw(t, "in the new box", "second while busy")
	r.Cancel()
	require.NoError(t, client.Close())

	// The parts every reader relayed, each resuming where the last one's record ends,
	// make one stream the `ai` client accepts.
	report := uicheck.RequireValidChunks(t, enginetest.Frames(readers...))
	require.Len(t, report.Messages, messages, "one message per response: first, second (unless joined), cancelled, approved, in the new box")
}

// sessionLogs reads the session's state files the profile declares (its transcript,
// or its state files), as the platform mirrors them.
func sessionLogs(t *testing.T, ctx context.Context, box *enginebox.Box, a *acp.Adapter, key string) map[string][]byte {
	t.Helper()
	p := a.Profile()
	patterns := p.StateFiles
	if p.SessionLog != "" {
		patterns = []string{p.SessionLog}
	}
	require.NotEmpty(t, patterns, "the profile declares a session log or state files")
	var globs []string
	for _, pat := range patterns {
		globs = append(globs, filepath.Join("/workspace/.home", p.StateDir, engines.SessionLogPath(pat, key)))
	}
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: "find-logs-" + uuid.NewString()[:8],
		Command: []string{"/bin/sh", "-c", "ls -1 " + strings.Join(globs, " ")}})
	require.NoError(t, err)
	out := map[string][]byte{}
	for line, err := range proc.ReadOutput(ctx, 0, true) {
		require.NoError(t, err)
		if line.Stream != engines.Stdout || len(line.Data) == 0 {
			continue
		}
		data, err := box.ReadFile(ctx, nil, string(line.Data))
		require.NoError(t, err)
		out[string(line.Data)] = data
	}
	require.NotEmpty(t, out, "the state files %v exist", globs)
	return out
}

func TestLiveQwenCode(t *testing.T) { runLiveConversation(t, acp.KindQwen) }

func TestLiveOpencode(t *testing.T) { runLiveConversation(t, acp.KindOpencode) }

func TestLiveCodexACP(t *testing.T) { runLiveConversation(t, acp.KindCodex) }

func TestLiveGeminiCLI(t *testing.T) { runLiveConversation(t, acp.KindGemini) }

// TestLiveGeminiCLIModes: in its trusted workspace Gemini CLI takes the modes its
// profile declares; under yolo a shell command runs without a permission request, and
// the mode change it reports as agent text stays out of the stream.
func TestLiveGeminiCLIModes(t *testing.T) {
	e := newLiveEnv(t, acp.KindGemini)
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "yolo"}
	rt, err := e.adapter.ActivateRuntime(e.ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	r := enginetest.StartLiveReader(t, e.ctx, client, nil)
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(e.ctx, "autoEdit"))
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(e.ctx, "yolo"))
	require.NoError(t, client.Submit(e.ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch yolo.txt"]]`)))
	require.Equal(t, engines.OutcomeCompleted, endedFor(r, "").Outcome)
	_, err = box.ReadFile(e.ctx, nil, "/workspace/yolo.txt")
	require.NoError(t, err, "the command ran without asking")
	for _, ev := range r.Seen {
		require.NotEqual(t, engines.EventInteractionOpened, ev.Type(), "yolo asks nothing")
		if out, ok := ev.(engines.ResponseOutput); ok {
			require.NotContains(t, out.Frame.StringField("delta"), "MODE_UPDATE")
		}
	}
	// The program did report the changes as text: the journal has them.
	proc, err := box.StartProcess(e.ctx, engines.ProcessSpec{Name: client.(*acp.Client).ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	reported := false
	for line, err := range proc.ReadOutput(e.ctx, 0, false) {
		require.NoError(t, err)
		reported = reported || bytes.Contains(line.Data, []byte(`"text":"[MODE_UPDATE] autoEdit"`))
	}
	require.True(t, reported, "Gemini CLI sent [MODE_UPDATE] text")
	r.Cancel()
	require.NoError(t, client.Close())
}

// requireModelSaw checks that one model request carried all of texts: a resumed
// conversation's new prompt together with its earlier turns.
func (e *liveEnv) requireModelSaw(t *testing.T, texts ...string) {
	t.Helper()
	for _, req := range e.model.Requests() {
		all := true
		for _, text := range texts {
			all = all && bytes.Contains(req.Body, []byte(text))
		}
		if all {
			return
		}
	}
	t.Fatalf("no model request carried all of %q: the program did not resume its conversation", texts)
}
