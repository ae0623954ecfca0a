package acp_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/acp"
	"github.com/astrabox/astrabox/engines/enginetest"
)

func TestLiveSessionLogAdmissionClaudeACP(t *testing.T) {
	runLiveSessionLogAdmission(t, newLiveEnv(t, acp.KindClaude))
}

func TestLiveSessionLogAdmissionCodexACP(t *testing.T) {
	runLiveSessionLogAdmission(t, newLiveEnv(t, acp.KindCodex))
}

func TestLiveSessionLogAdmissionQwen(t *testing.T) {
	runLiveSessionLogAdmission(t, newLiveEnv(t, acp.KindQwen))
}

// DeepSeek Harness admits at its raw session log's agent/inbox/spliced line.
func TestLiveSessionLogAdmissionDeepSeekHarness(t *testing.T) {
	runLiveSessionLogAdmission(t, newDSHEnv(t))
}

// runLiveSessionLogAdmission checks a profile that admits from its program's session
// log: a prompt whose reply streams for seconds is admitted while it streams, once its
// user record is in the program's transcript, not at its reply; a second prompt with
// the same text is found at its own record, and admitted once.
func runLiveSessionLogAdmission(t *testing.T, e *liveEnv) {
	require.Equal(t, acp.AdmissionSessionLog, e.adapter.Profile().Admission)
	ctx := e.ctx
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuid.NewString(), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	const slow = "[[script:slow chunks=12]]"
	for range 2 {
		in := uuid.NewString()
		require.NoError(t, client.Submit(ctx, engines.TextInput(in, slow)))
		from := len(r.Seen)
		r.Until("admission of "+in, func(ev engines.Event) bool {
			a, ok := ev.(engines.InputAdmitted)
			return ok && a.InputID == in
		})
		at := len(r.Seen)
		require.Equal(t, engines.OutcomeCompleted, endedFor(r, "").Outcome)
		// Admitted while the reply still streamed: text followed the admission.
		var streamedAfter bool
		for _, ev := range r.Seen[at:] {
			if out, ok := ev.(engines.ResponseOutput); ok && out.Frame.Type() == "text-delta" {
				streamedAfter = true
			}
		}
		require.True(t, streamedAfter, "admitted from the transcript, before the reply:\n%s", enginetest.LastEvents(r.Seen[from:], 40))
		admitted := slices.DeleteFunc(slices.Clone(r.Seen[from:]), func(ev engines.Event) bool {
			a, ok := ev.(engines.InputAdmitted)
			return !ok || a.InputID != in
		})
		require.Len(t, admitted, 1, "admitted once: the reply does not admit it again")
	}
}
