package claude_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
)

// launchBox is a box of files that records the processes asked of it and starts none:
// enough to see which conversation Claude Code would be launched on.
type launchBox struct {
	fileBox
	specs []engines.ProcessSpec
}

var errNotStarted = errors.New("the launch box starts no process")

func (b *launchBox) StartProcess(_ context.Context, spec engines.ProcessSpec) (engines.ProcessSession, error) {
	b.specs = append(b.specs, spec)
	return nil, errNotStarted
}

// conversationFlag returns the flag and value naming the conversation in a launch.
func conversationFlag(t *testing.T, spec engines.ProcessSpec) (string, string) {
	t.Helper()
	for i, arg := range spec.Command {
		if (arg == "--session-id" || arg == "--resume") && i+1 < len(spec.Command) {
			return arg, spec.Command[i+1]
		}
	}
	t.Fatalf("no conversation flag in %v", spec.Command)
	return "", ""
}

// TestAttachNeverStartsAnEmptyConversation refuses to start a conversation whose
// transcript is not in the box while the platform recorded content for it: Claude would
// otherwise start a new, empty one.
func TestAttachNeverStartsAnEmptyConversation(t *testing.T) {
	t.Parallel()
	a := claude.NewAdapter(claude.Config{})
	for _, mode := range []engines.AttachMode{engines.AttachReconnect, engines.AttachRestore} {
		sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), SessionKind: engines.SessionKindAgentChat,
			AttachMode: mode, ResumeSessionKey: claudeUUID()}
		box := &launchBox{fileBox: fileBox{files: map[string][]byte{}}}
		_, err := a.ActivateRuntime(context.Background(), sc, box)
		require.ErrorContains(t, err, "no transcript", string(mode))
		require.Empty(t, box.specs, "nothing is started")
	}
	sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), AttachMode: engines.AttachRestore}
	_, err := a.ActivateRuntime(context.Background(), sc, &fileBox{files: map[string][]byte{}})
	require.ErrorContains(t, err, "without a session key")
}

// TestAttachLaunchesTheSameConversation checks how Claude Code is started again on an
// attached conversation: --resume of its transcript when Claude wrote one, and the same
// id with --session-id when Claude never wrote it and the platform knows the
// conversation is empty (a Session that never got a message).
func TestAttachLaunchesTheSameConversation(t *testing.T) {
	t.Parallel()
	a := claude.NewAdapter(claude.Config{})
	for _, tc := range []struct {
		name       string
		mode       engines.AttachMode
		transcript bool
		empty      bool
		want       string
	}{
		{"reconnect, never written", engines.AttachReconnect, false, true, "--session-id"},
		{"restore, never written", engines.AttachRestore, false, true, "--session-id"},
		{"reconnect, written", engines.AttachReconnect, true, false, "--resume"},
		{"restore, written", engines.AttachRestore, true, false, "--resume"},
		{"restore, written though the platform saw nothing yet", engines.AttachRestore, true, true, "--resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := claudeUUID()
			sc := engines.EngineStartupContext{SessionID: "s-" + claudeUUID(), SessionKind: engines.SessionKindAgentChat,
				AttachMode: tc.mode, ResumeSessionKey: key, ConversationEmpty: tc.empty}
			box := &launchBox{fileBox: fileBox{files: map[string][]byte{}}}
			if tc.transcript {
				paths := a.PathsFor(sc)
				box.files[claude.TranscriptPath(paths.ConfigDir, paths.WorkDir, key)] = []byte(`{"type":"user"}` + "\n")
			}
			_, err := a.ActivateRuntime(context.Background(), sc, box)
			require.ErrorIs(t, err, errNotStarted)
			require.Len(t, box.specs, 1)
			flag, value := conversationFlag(t, box.specs[0])
			require.Equal(t, tc.want, flag)
			require.Equal(t, key, value, "the Session's own conversation")
		})
	}

	// A new Session gets a conversation id of its own.
	box := &launchBox{fileBox: fileBox{files: map[string][]byte{}}}
	_, err := a.ActivateRuntime(context.Background(), engines.EngineStartupContext{SessionID: "s-" + claudeUUID()}, box)
	require.ErrorIs(t, err, errNotStarted)
	flag, value := conversationFlag(t, box.specs[0])
	require.Equal(t, "--session-id", flag)
	require.NotEmpty(t, value)
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
