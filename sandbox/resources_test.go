package sandbox

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseResources(t *testing.T) {
	t.Parallel()
	l, err := ParseResources(json.RawMessage(`{"cpu": "500m", "memory": "2Gi", "pids": 512, "tmp": "64M", "disk": 1048576}`))
	require.NoError(t, err)
	require.Equal(t, Limits{CPUMillis: 500, MemoryBytes: 2 << 30, Pids: 512, TmpBytes: 64e6, WorkspaceBytes: 1 << 20}, l)

	l, err = ParseResources(json.RawMessage(`{"cpu": 1.5, "memory": "512Mi"}`))
	require.NoError(t, err)
	require.Equal(t, Limits{CPUMillis: 1500, MemoryBytes: 512 << 20}, l)
	l, err = ParseResources(json.RawMessage(`{"cpu": "2"}`))
	require.NoError(t, err)
	require.Equal(t, int64(2000), l.CPUMillis)

	for _, raw := range []string{``, `null`, `{}`} {
		l, err := ParseResources(json.RawMessage(raw))
		require.NoError(t, err, raw)
		require.Equal(t, Limits{}, l, raw)
	}
	for _, raw := range []string{`[]`, `{"memroy": "1Gi"}`, `{"memory": "lots"}`, `{"cpu": "-1"}`, `{"pids": 1.5}`,
		`{"pids": "10"}`, `{"memory": true}`} {
		_, err := ParseResources(json.RawMessage(raw))
		require.ErrorIs(t, err, ErrInvalidSpec, raw)
	}
}

func TestLimitsOr(t *testing.T) {
	t.Parallel()
	got := Limits{MemoryBytes: 1}.Or(Limits{MemoryBytes: 2, Pids: 3, CPUMillis: 4, TmpBytes: 5, WorkspaceBytes: 6})
	require.Equal(t, Limits{MemoryBytes: 1, Pids: 3, CPUMillis: 4, TmpBytes: 5, WorkspaceBytes: 6}, got)
}
