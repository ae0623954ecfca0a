package faultstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// binaries are the platform's programs built for one stack.
type binaries struct {
	astrabox string
	runner   string
}

// build compiles astrabox and astrabox-runner from the checkout into dir, so a
// stack never runs a stale bin/ from an earlier build (`make build` is the
// same command; the build cache makes it quick).
func build(ctx context.Context, root, dir string) (binaries, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return binaries{}, fmt.Errorf("make bin folder: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/astrabox", "./cmd/astrabox-runner")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return binaries{}, fmt.Errorf("build astrabox and astrabox-runner: %w: %s", err, out)
	}
	return binaries{astrabox: filepath.Join(dir, "astrabox"), runner: filepath.Join(dir, "astrabox-runner")}, nil
}
