package agentbin_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/agentbin"
)

func TestLocatesThePinnedPrograms(t *testing.T) {
	t.Parallel()
	root, err := agentbin.Root()
	require.NoError(t, err)
	for name, version := range map[string]string{
		agentbin.Claude: agentbin.ClaudeVersion,
		agentbin.Codex:  agentbin.CodexVersion,
		agentbin.Pi:     agentbin.PiVersion,
	} {
		prog, err := agentbin.Locate(root, name)
		require.NoError(t, err, "run `make deps-agents` to install the pinned Agent programs")
		require.Equal(t, version, prog.Version)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, prog.Command[0], append(prog.Command[1:], "--version")...).CombinedOutput()
		cancel()
		require.NoError(t, err, "%s --version: %s", name, out)
		require.Contains(t, string(out), version, "%s reports the pinned release", name)
	}
}

func TestMissingInstallSaysHowToFixIt(t *testing.T) {
	t.Parallel()
	_, err := agentbin.Locate(t.TempDir(), agentbin.Claude)
	require.ErrorIs(t, err, agentbin.ErrNotInstalled)
	require.Contains(t, err.Error(), "make deps-agents")
}

func TestOtherReleaseIsRefused(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pkg := filepath.Join(root, "tools", "agents", "node_modules", "@anthropic-ai", "claude-code")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"1.0.0"}`), 0o644))
	_, err := agentbin.Locate(root, agentbin.Claude)
	require.True(t, errors.Is(err, agentbin.ErrNotInstalled))
	require.True(t, strings.Contains(err.Error(), "1.0.0 is installed but "+agentbin.ClaudeVersion+" is pinned"), err.Error())
}
