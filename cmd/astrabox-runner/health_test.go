package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/sandbox/runner"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// TestHealthAnswersOnceTheRunnerServes: the images' readiness check fails while no
// runner serves the configured socket and succeeds once one does, also when the
// runner requires its token.
func TestHealthAnswersOnceTheRunnerServes(t *testing.T) {
	t.Parallel()
	for name, token := range map[string]string{"no token": "", "token": "s3cret"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := runnerapi.Config{StateDir: dir, Workspace: dir, Socket: filepath.Join(dir, "runner.sock"), Token: token,
				Env: map[string]string{"PATH": "/usr/bin:/bin"}}
			raw, err := json.Marshal(cfg)
			require.NoError(t, err)
			configPath := filepath.Join(dir, "runner.json")
			require.NoError(t, os.WriteFile(configPath, raw, 0o600))

			require.Error(t, health([]string{"-config", configPath}), "nothing serves yet")

			r, err := runner.New(cfg, log.New(io.Discard, "", 0))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			ready, done := make(chan struct{}), make(chan error, 1)
			go func() { done <- r.Serve(ctx, func() { close(ready) }) }()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("runner did not start: %v", err)
			}
			require.NoError(t, health([]string{"-config", configPath}))
		})
	}
}
