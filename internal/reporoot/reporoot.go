// Package reporoot finds the repository checkout that tools and tests run from,
// where the pinned npm tooling (tools/) and the built binaries (bin/) live.
package reporoot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvVar names the variable make exports with the repository root.
const EnvVar = "ASTRABOX_REPO_ROOT"

// Find returns $ASTRABOX_REPO_ROOT, or the nearest ancestor of the working
// directory holding go.mod.
func Find() (string, error) {
	if root := os.Getenv(EnvVar); root != "" {
		return root, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod above the working directory; set " + EnvVar)
		}
		dir = parent
	}
}
