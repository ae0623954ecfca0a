package boximage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/boximage"
	"github.com/astrabox/astrabox/internal/reporoot"
)

// TestBuildRefusesWhatItCannotBuild: an image deploy/images does not define, and a
// runner that is not a program, are refused by name before anything is built.
// Not parallel: it sets RUNNER in the environment the script inherits.
func TestBuildRefusesWhatItCannotBuild(t *testing.T) {
	root, err := reporoot.Find()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err = boximage.Build(ctx, root, "no-such-program")
	require.Error(t, err)
	require.Contains(t, err.Error(), "unknown image no-such-program")
	require.Contains(t, err.Error(), "claude-code", "the error lists the images there are")
	_, statErr := os.Stat(filepath.Join(boximage.Dir(root), "no-such-program"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing was made")

	if os.Getuid() != 0 {
		t.Skip("the runner check comes after the check for root")
	}
	t.Setenv("RUNNER", filepath.Join(t.TempDir(), "missing-runner"))
	_, err = boximage.Build(ctx, root, boximage.ClaudeCode)
	require.Error(t, err)
	require.Contains(t, err.Error(), "missing-runner is not an executable file")
}
