package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/config"
)

// TestDevSecretsKeyIsKeptAcrossRuns: the first run writes a valid key only its owner
// reads; later runs use the same one, so sealed values still open.
func TestDevSecretsKeyIsKeptAcrossRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := devSecretsKey(dir)
	require.NoError(t, err)
	assert.Len(t, config.Secrets{Key: first}.KeyBytes(), config.SecretsKeyLen)
	info, err := os.Stat(filepath.Join(dir, devSecretsKeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := devSecretsKey(dir)
	require.NoError(t, err)
	assert.Equal(t, first.Reveal(), again.Reveal())
}
