package claude_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
)

// TestAttachNeverStartsAnEmptyConversation refuses to resume a conversation whose
// transcript is not in the box: Claude would otherwise start a new, empty one.
func TestAttachNeverStartsAnEmptyConversation(t *testing.T) {
	t.Parallel()
	a := claude.NewAdapter(claude.Config{})
	for _, mode := range []engines.AttachMode{engines.AttachReconnect, engines.AttachRestore} {
		sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), SessionKind: engines.SessionKindAgentChat,
			AttachMode: mode, ResumeSessionKey: claudeUUID()}
		_, err := a.ActivateRuntime(context.Background(), sc, &fileBox{files: map[string][]byte{}})
		require.ErrorContains(t, err, "no transcript", string(mode))
	}
	sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), AttachMode: engines.AttachRestore}
	_, err := a.ActivateRuntime(context.Background(), sc, &fileBox{files: map[string][]byte{}})
	require.ErrorContains(t, err, "without a session key")
}

// TestPathsFollowTheRuntimeIdentity puts Claude's config directory under the
// identity's home and its transcript under the workspace's slug.
func TestPathsFollowTheRuntimeIdentity(t *testing.T) {
	t.Parallel()
	a := claude.NewAdapter(claude.Config{})
	id := &engines.RuntimeIdentity{Account: "c1", HomeDir: "/home/c1", WorkspaceDir: "/work/c1", SourceDir: "/work/c1/src",
		FileRoot: "/work/c1/files", CacheDir: "/home/c1/.cache", TempDir: "/tmp/c1"}
	p := a.PathsFor(engines.EngineStartupContext{RuntimeIdentity: id})
	require.Equal(t, "/home/c1/.claude", p.ConfigDir)
	require.Equal(t, "/home/c1/.claude/projects/-work-c1/abc.jsonl", claude.TranscriptPath(p.ConfigDir, p.WorkDir, "abc"))
	def := a.PathsFor(engines.EngineStartupContext{})
	require.Equal(t, "/workspace/.home/.claude", def.ConfigDir)
	require.Equal(t, "/workspace", def.WorkDir)
}

// TestEveryLaunchLetsTheProcessSwitchToBypass puts the flag that makes
// bypassPermissions a mode the running process accepts on every launch, new or
// resumed, whatever mode it starts in.
func TestEveryLaunchLetsTheProcessSwitchToBypass(t *testing.T) {
	t.Parallel()
	a := claude.NewAdapter(claude.Config{})
	for _, mode := range []string{"", "default", "plan"} {
		for _, resume := range []bool{false, true} {
			sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), SessionKind: engines.SessionKindAgentChat, PermissionMode: mode}
			args := a.LaunchCommand(sc, resume)
			require.Contains(t, args, "--allow-dangerously-skip-permissions", "mode %q resume %v", mode, resume)
			require.NotContains(t, args, "--dangerously-skip-permissions", "the process does not start bypassing")
		}
	}
}
