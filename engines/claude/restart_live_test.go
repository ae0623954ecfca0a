package claude_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// TestLiveReplySurvivesWorkerRestart restarts the worker's side of a box (the local
// backend closed and a new one opened, the reader reconnected from its cursor) while
// Claude Code streams a slow reply: the model stream goes on through the box's egress
// forwarder, so Claude neither breaks off nor asks again, the reply is displayed
// once, and the forward serves the next turn.
func TestLiveReplySurvivesWorkerRestart(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	const prompt = "[[script:slow chunks=20]]"
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), prompt)))
	r.Until("first text delta", enginetest.IsFrame("text-delta"))
	at := r.Seen[len(r.Seen)-1].EventCursor()

	// The worker goes away mid-reply and a new one takes the box over.
	r.Cancel()
	require.NoError(t, client.Close())
	require.NoError(t, e.backend.Close())
	second := localtest.NewBackend(t, e.opts)
	h, err := second.Get(ctx, box.ID())
	require.NoError(t, err)
	box2 := enginebox.New(h)
	sc2 := sc
	sc2.AttachMode, sc2.ResumeSessionKey, sc2.ResumeMaterial = engines.AttachReconnect, client.EngineSessionKey(), rt.ResumeMaterial
	rt2, err := e.adapter.ActivateRuntime(ctx, sc2, box2)
	require.NoError(t, err)
	client = rt2.EngineClient
	r2 := enginetest.StartLiveReader(t, ctx, client, &at)
	require.Equal(t, engines.OutcomeCompleted, r2.Ended().Outcome)

	var frames []engines.Frame
	for _, ev := range slices.Concat(r.Seen, r2.Seen) {
		if d, ok := ev.(engines.RuntimeDiagnostic); ok && d.EventType == "system/api_retry" {
			// Say what the model service and the box's forwarder saw, for the reader of
			// a failure: which request broke off, and whether the forwarder was replaced.
			for _, req := range e.model.Requests() {
				t.Logf("model request %d %s %q: outcome %s", req.Seq, req.Path, req.Prompt, req.Outcome)
			}
			boxDir := filepath.Join(e.opts.StateDir, "boxes", box.ID())
			egressLog, _ := os.ReadFile(filepath.Join(boxDir, "egress.log"))
			boxLog, _ := os.ReadFile(filepath.Join(boxDir, "box.log"))
			t.Logf("retry: %s\nforwarder log:\n%s\nbox log:\n%s", d.Raw, egressLog, boxLog)
			t.Fatal("Claude retried the model request: the model stream broke during the restart")
		}
		if out, ok := ev.(engines.ResponseOutput); ok {
			frames = append(frames, out.Frame)
		}
	}
	var slow []devmodel.Request
	for _, req := range e.model.Requests() {
		if req.Prompt == prompt {
			slow = append(slow, req)
		}
	}
	require.Len(t, slow, 1, "one model request carried the whole reply")
	require.Equal(t, devmodel.OutcomeCompleted, slow[0].Outcome)
	shown := uicheck.RequireValidChunks(t, engines.OmitRetracted(frames))
	require.Len(t, shown.Messages, 1)
	var text strings.Builder
	for _, p := range shown.Messages[0].PartsOfType("text") {
		text.WriteString(p["text"].(string))
	}
	require.Equal(t, slow[0].Reply, text.String(), "the reply is displayed once, whole")

	// The forward serves new requests after the restart.
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "after the restart")))
	require.Equal(t, engines.OutcomeCompleted, r2.Ended().Outcome)
	require.NoError(t, client.Close())
}
