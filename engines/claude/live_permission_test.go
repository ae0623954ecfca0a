package claude_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
)

// TestLivePermissionModesSwitchOnARunningProcess starts the real Claude Code in the
// default mode and switches the running process through every mode it declares:
// bypassPermissions runs a prompt-worthy command without an approval, and back in
// default the same kind of command asks again. Launched without
// --allow-dangerously-skip-permissions, Claude refuses the switch to bypassPermissions.
func TestLivePermissionModesSwitchOnARunningProcess(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-mode-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "default"}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	r := enginetest.StartLiveReader(t, ctx, client, nil)
	setter := client.(engines.PermissionModeSetter)

	require.NoError(t, setter.SetPermissionMode(ctx, "bypassPermissions"), "the process was launched so that bypassPermissions can be switched to")
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), `[[script:bash cmd="touch bypassed.txt"]]`)))
	end := r.Until("the bypassed command's response end", func(ev engines.Event) bool {
		require.NotEqual(t, engines.EventInteractionOpened, ev.Type(), "bypassPermissions asks for no approval")
		return ev.Type() == engines.EventResponseEnded
	}).(engines.ResponseEnded)
	require.Equal(t, engines.OutcomeCompleted, end.Outcome)
	_, err = box.ReadFile(ctx, nil, "/workspace/bypassed.txt")
	require.NoError(t, err, "the command ran without an approval")

	require.NoError(t, setter.SetPermissionMode(ctx, "default"))
	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), `[[script:bash cmd="touch asked.txt"]]`)))
	opened := r.Until("an approval in default mode", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionDeny, Reason: "not now"}))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	_, err = box.ReadFile(ctx, nil, "/workspace/asked.txt")
	require.Error(t, err, "the denied command did not run")

	for _, mode := range claude.PermissionModes {
		require.NoError(t, setter.SetPermissionMode(ctx, mode), "Claude Code accepts %s on a running process", mode)
	}
	err = setter.SetPermissionMode(ctx, "manual")
	var refused *engines.RuntimeControlRefused
	require.ErrorAs(t, err, &refused, "an alias is not a mode of its own")
	require.Equal(t, engines.ControlSetPermissionMode, refused.Control)
}

// TestLiveBypassRefusedWithoutTheLaunchFlag shows why the flag is on the command line:
// a process started without it refuses bypassPermissions in its own words, which the
// client returns as a RuntimeControlRefused the platform can tell from a lost connection.
func TestLiveBypassRefusedWithoutTheLaunchFlag(t *testing.T) {
	e := newLiveEnv(t)
	ctx := e.ctx
	_, box := e.newBox()
	sc := engines.EngineStartupContext{SessionID: "live-noflag-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "default"}
	client := claude.StartWithoutSkipPermissionsFlag(t, ctx, e.adapter, sc, box)
	err := client.(engines.PermissionModeSetter).SetPermissionMode(ctx, "bypassPermissions")
	var refused *engines.RuntimeControlRefused
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Message, "dangerously-skip-permissions")
	t.Logf("Claude Code's refusal: %s (code %q)", refused.Message, refused.Code)
	require.NoError(t, client.(engines.PermissionModeSetter).SetPermissionMode(ctx, "acceptEdits"), "the process still takes other modes")
}
