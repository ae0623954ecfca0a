package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/reporoot"
)

// TestConsoleInChromium drives the web console in Debian's Chromium against
// `astrabox dev` with the real Claude Code and the scripted model server: sign in,
// start a conversation, stream, reload mid-stream, approve a tool, the Diff panel,
// interrupt, share and the shared view in a second browser, rename
// (web/console/e2e/console.e2e.mjs). Screenshots land in var/console-e2e.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole platform and a browser")
	}
	root, err := reporoot.Find()
	require.NoError(t, err)
	script := filepath.Join(root, "web", "console", "e2e", "console.e2e.mjs")
	_, err = os.Stat(filepath.Join(root, "web", "node_modules", "playwright-core"))
	require.NoError(t, err, "the console's npm packages are missing: run `make deps`")
	_, err = os.Stat(filepath.Join(root, "web", "dist", "index.html"))
	require.NoError(t, err, "the console is not built into the binary: run `make build`")
	_, err = os.Stat("/usr/bin/chromium")
	require.NoError(t, err, "Chromium is missing: run `make deps` (it installs Debian's chromium)")

	c, agentID, _ := startRoutesStack(t)
	out := filepath.Join(root, "var", "console-e2e")
	require.NoError(t, os.MkdirAll(out, 0o755))

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = filepath.Join(root, "web", "console")
	cmd.Env = append(os.Environ(),
		"SERVICE_URL="+c.base[:len(c.base)-len("/api/v1")],
		"ACCESS_TOKEN="+c.token,
		"AGENT_ID="+agentID,
		"E2E_OUT="+out,
	)
	output, err := cmd.CombinedOutput()
	t.Logf("console e2e:\n%s", output)
	require.NoError(t, err, "the browser test failed; screenshots in %s; platform output:\n%s", out, c.dev.output)
	c.dev.interrupt(t)
	c.setup.assertStopped(t)
}
