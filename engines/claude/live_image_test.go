package claude_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/engines/claude"
	"github.com/astrabox/astrabox/engines/enginetest"
	"github.com/astrabox/astrabox/internal/agentbin"
	"github.com/astrabox/astrabox/internal/boximage"
	"github.com/astrabox/astrabox/internal/uicheck"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
)

// TestLiveConversationInTheClaudeCodeImage holds a conversation with the pinned Claude
// Code in a local box whose root is the Claude Code image (deploy/images/claude-code,
// built daemonless as `make images` does, or reused when its inputs are unchanged):
// the program, its shell and its tools all come from the image, nothing from the host
// but the runner. A plain turn streams, and a tool turn asks for approval and runs the
// image's own bash.
func TestLiveConversationInTheClaudeCodeImage(t *testing.T) {
	localtest.RequireBoxes(t)
	root, err := agentbin.Root()
	require.NoError(t, err)
	// A build from nothing takes minutes (docs/images.md has the figures); later runs
	// reuse it.
	bctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	img, err := boximage.Build(bctx, root, boximage.ClaudeCode)
	require.NoError(t, err)
	t.Logf("image %s: %s", img.Rootfs, strings.ReplaceAll(strings.TrimSpace(img.Digests), "\n", "; "))

	e := newLiveEnv(t)
	ctx := e.ctx
	e.spec.Image = sandbox.Image{Root: img.Rootfs}
	e.spec.Mounts = nil
	// "claude" on the image's PATH: /usr/local/bin/claude, the image's own install.
	e.adapter = claude.NewAdapter(claude.Config{})
	_, box := e.newBox()

	osRelease, err := box.ReadFile(ctx, nil, "/etc/os-release")
	require.NoError(t, err)
	require.Contains(t, string(osRelease), "VERSION_CODENAME=trixie", "the box's root is the image's Debian, not the host's")

	sc := engines.EngineStartupContext{SessionID: "live-image-" + uuidFor(t), SessionKind: engines.SessionKindAgentChat,
		SandboxID: box.ID(), PermissionMode: "default"}
	rt, err := e.adapter.ActivateRuntime(ctx, sc, box)
	require.NoError(t, err)
	client := rt.EngineClient
	t.Cleanup(func() { _ = client.Close() })
	info, err := client.(engines.ServerInfoProvider).ServerInfo(ctx)
	require.NoError(t, err)
	require.Equal(t, agentbin.ClaudeVersion, *info.RuntimeVersions.Components[0].Version, "the image holds the pinned release")
	r := enginetest.StartLiveReader(t, ctx, client, nil)

	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t), "hello from the image")))
	r.Until("streamed text", enginetest.IsFrame("text-delta"))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)

	require.NoError(t, client.Submit(ctx, engines.TextInput(uuidFor(t),
		`[[script:bash cmd="cat /etc/debian_version > /workspace/debian.txt; readlink -f /usr/local/bin/claude >> /workspace/debian.txt"]]`)))
	opened := r.Until("the command's approval", enginetest.IsType(engines.EventInteractionOpened)).(engines.InteractionOpened)
	require.NoError(t, client.Answer(ctx, opened.InteractionID, engines.InteractionAnswer{Decision: engines.DecisionApprove}))
	require.Equal(t, engines.OutcomeCompleted, r.Ended().Outcome)
	ran, err := box.ReadFile(ctx, nil, "/workspace/debian.txt")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(ran)), "\n")
	require.Len(t, lines, 2, "the command's output: %q", ran)
	require.True(t, strings.HasPrefix(lines[0], "13."), "Debian 13 in the box: %q", lines[0])
	require.Equal(t, "/opt/astrabox/claude/claude", lines[1], "Claude Code runs from the image's install")

	r.Stop()
	var frames []engines.Frame
	for _, ev := range r.Seen {
		if out, ok := ev.(engines.ResponseOutput); ok {
			frames = append(frames, out.Frame)
		}
	}
	report := uicheck.RequireValidChunks(t, frames)
	require.Len(t, report.Messages, 2, "one message per response")
}
