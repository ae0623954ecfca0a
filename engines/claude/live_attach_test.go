package claude_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
)

// TestLiveNeverWrittenConversationKeepsItsKey drives a conversation that never got a
// message through the faults a platform meets: a new reader reconnects to the running
// process, the process is killed, and the box is replaced. Claude Code writes no
// transcript before its first turn, so each relaunch starts the same conversation id
// afresh, and the first message is answered under the key the Session was given.
func TestLiveNeverWrittenConversationKeepsItsKey(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	handle, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat, SandboxID: box.ID()}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	first := rt.EngineClient.(*claude.Client)
	key := first.EngineSessionKey()
	paths := e.adapter.PathsFor(sc)
	transcript := claude.TranscriptPath(paths.ConfigDir, paths.WorkDir, key)
	_, err = box.ReadFile(ctx, nil, transcript)
	require.Error(t, err, "Claude Code writes its transcript only at its first turn")

	// The platform restarts: a new reader attaches to the process that still runs.
	require.NoError(t, first.Close())
	attach := sc
	attach.AttachMode, attach.ResumeSessionKey, attach.ResumeMaterial = engines.AttachReconnect, key, rt.ResumeMaterial
	rt, err = e.adapter.ActivateRuntime(ctx, attach, box)
	require.NoError(t, err)
	attached := rt.EngineClient.(*claude.Client)
	require.Equal(t, key, attached.EngineSessionKey())
	require.Equal(t, first.ProcessName(), attached.ProcessName(), "the running process is the conversation")

	// The process is killed.
	r := enginetest.StartLiveReader(t, ctx, attached, nil)
	proc, err := box.StartProcess(ctx, engines.ProcessSpec{Name: attached.ProcessName(), Command: []string{"/bin/false"}})
	require.NoError(t, err)
	require.NoError(t, proc.Signal(ctx, "KILL"))
	select {
	case err := <-r.Errs:
		require.ErrorIs(t, err, engines.ErrRuntimeConnectionLost)
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not see the process end")
	}
	r.Cancel()
	require.NoError(t, attached.Close())
	attach.ResumeMaterial = rt.ResumeMaterial
	_, err = e.adapter.ActivateRuntime(ctx, attach, box)
	require.ErrorContains(t, err, "no transcript", "content the platform recorded is never replaced by an empty conversation")
	attach.ConversationEmpty = true
	rt, err = e.adapter.ActivateRuntime(ctx, attach, box)
	require.NoError(t, err)
	relaunched := rt.EngineClient.(*claude.Client)
	require.Equal(t, key, relaunched.EngineSessionKey(), "the same conversation id, not a new one")
	require.NotEqual(t, attached.ProcessName(), relaunched.ProcessName())
	require.NoError(t, relaunched.Close())

	// The box is replaced: Claude wrote no transcript, so there is none to restore.
	require.NoError(t, e.backend.Destroy(ctx, handle.ID()))
	_, box2 := e.newBox()
	restore := sc
	restore.SandboxID, restore.AttachMode, restore.ResumeSessionKey, restore.ConversationEmpty = box2.ID(), engines.AttachRestore, key, true
	rt, err = e.adapter.ActivateRuntime(ctx, restore, box2)
	require.NoError(t, err)
	client := rt.EngineClient
	require.Equal(t, key, client.EngineSessionKey())

	// The first message is answered in the Session's conversation.
	r = enginetest.StartLiveReader(t, ctx, client, nil)
	in := uuidFor(t)
	require.NoError(t, client.Submit(ctx, engines.TextInput(in, "hello at last")))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	admits := func(ev engines.Event) bool {
		a, ok := ev.(engines.InputAdmitted)
		return ok && a.InputID == in
	}
	if !slices.ContainsFunc(r.Seen, admits) {
		r.Until("the first message admitted", admits)
	}
	_, err = box2.ReadFile(ctx, nil, transcript)
	require.NoError(t, err, "Claude wrote the conversation under the Session's key")
	st, err := client.State(ctx)
	require.NoError(t, err)
	require.Contains(t, st.AdmittedInputIDs, in)
	r.Cancel()
	require.NoError(t, client.Close())
}
