package config

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExampleFileMatchesDefaults keeps config.example.yaml honest: it must load,
// list only known keys, and show the built-in defaults.
func TestExampleFileMatchesDefaults(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	example := filepath.Join(filepath.Dir(here), "..", "config.example.yaml")
	_, err := os.Stat(example)
	require.NoError(t, err)

	fromFile, err := Load(Source{File: example, Environ: []string{}})
	require.NoError(t, err)
	defaults, err := Load(Source{Environ: []string{}})
	require.NoError(t, err)
	assert.Equal(t, defaults, fromFile)
}
