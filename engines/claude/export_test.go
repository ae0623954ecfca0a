package claude

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

// skipPermissionsFlag is the launch flag that lets a running process switch to
// bypassPermissions.
const skipPermissionsFlag = "--allow-dangerously-skip-permissions"

// LaunchCommand is the command processSpec gives Claude Code for a new (resume false)
// or resumed conversation.
func (a *Adapter) LaunchCommand(sc engines.EngineStartupContext, resume bool) []string {
	flag := flagSessionID
	if resume {
		flag = flagResume
	}
	return a.processSpec(sc, a.PathsFor(sc), newUUID(), flag, nil).Command
}

// StartWithoutSkipPermissionsFlag starts Claude Code the way earlier releases of the
// adapter did, without --allow-dangerously-skip-permissions, and returns its
// initialized client; the test's clean-up closes it and its process ends with the box.
func StartWithoutSkipPermissionsFlag(t testing.TB, ctx context.Context, a *Adapter, sc engines.EngineStartupContext, box engines.Box) engines.RuntimeClient {
	t.Helper()
	paths := a.PathsFor(sc)
	session := newUUID()
	spec := a.processSpec(sc, paths, session, flagSessionID, nil)
	spec.Command = slices.DeleteFunc(spec.Command, func(arg string) bool { return arg == skipPermissionsFlag })
	proc, err := box.StartProcess(ctx, spec)
	require.NoError(t, err)
	client, err := NewClient(ClientConfig{Box: box, Process: proc, Identity: sc.RuntimeIdentity, SessionID: sc.SessionID,
		ClaudeSession: session, TranscriptPath: TranscriptPath(paths.ConfigDir, paths.WorkDir, session), Capabilities: a.Capabilities(),
		CheckpointPath: CheckpointPath(paths.ConfigDir, proc.Name())})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, client.initialize(ctx))
	return client
}

// MCPConfig is the --mcp-config document the adapter writes for servers.
var MCPConfig = mcpConfig
