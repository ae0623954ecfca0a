package store_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// openKeyed opens another Store on dsn with a secrets key.
func openKeyed(t *testing.T, dsn string, key []byte) *store.Store {
	t.Helper()
	st, err := store.Open(testutil.Context(t), dsn, testutil.Logger(t), store.Options{SecretsKey: key})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newKey(t *testing.T) []byte {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

// TestAgentSecretsAreSealed stores an Agent's secret values sealed: the row holds
// neither plaintext, only a store with the same key opens them, and the runtime config
// has them back in place of their markers.
func TestAgentSecretsAreSealed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := newKey(t)
	st := openKeyed(t, f.dsn, key)
	config := json.RawMessage(`{"mcp_servers":[{"name":"a/b","transport":"http","url":"https://mcp.example","headers":{"Authorization":"[redacted]"}}]}`)
	secrets := store.AgentSecrets{"/mcp_servers/0/headers/Authorization": "Bearer top-secret-value"}
	a, err := st.CreateAgent(f.ctx, store.NewAgent{Name: uniq("sealed"), EngineKind: "claude", RuntimeProfileID: f.profile.ID, Config: config, Secrets: secrets})
	require.NoError(t, err)

	var raw []byte
	var rawConfig string
	require.NoError(t, store.QueryRowForTest(f.ctx, st, "SELECT secrets, config::text FROM agents WHERE id = $1", a.ID, &raw, &rawConfig))
	require.NotEmpty(t, raw)
	require.False(t, bytes.Contains(raw, []byte("top-secret-value")))
	require.NotContains(t, rawConfig, "top-secret-value")

	got, err := st.GetAgentSecrets(f.ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, secrets, got)
	runtime, err := st.GetAgentRuntimeConfig(f.ctx, a.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"mcp_servers":[{"name":"a/b","transport":"http","url":"https://mcp.example","headers":{"Authorization":"Bearer top-secret-value"}}]}`, string(runtime))

	// A store without the key neither writes nor reads secret values; one with another
	// key cannot open them.
	_, err = f.st.GetAgentSecrets(f.ctx, a.ID)
	require.ErrorIs(t, err, store.ErrNoSecretsKey)
	_, err = f.st.CreateAgent(f.ctx, store.NewAgent{Name: uniq("keyless"), EngineKind: "claude", RuntimeProfileID: f.profile.ID, Config: config, Secrets: secrets})
	require.ErrorIs(t, err, store.ErrNoSecretsKey)
	_, err = openKeyed(t, f.dsn, newKey(t)).GetAgentSecrets(f.ctx, a.ID)
	require.Error(t, err)

	// Updating the config replaces the secrets; other updates keep them.
	a, err = st.UpdateAgent(f.ctx, a.ID, a.Version, store.AgentUpdate{Description: ptr("kept")})
	require.NoError(t, err)
	got, err = st.GetAgentSecrets(f.ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, secrets, got)
	_, err = st.UpdateAgent(f.ctx, a.ID, a.Version, store.AgentUpdate{Config: json.RawMessage(`{}`)})
	require.NoError(t, err)
	got, err = st.GetAgentSecrets(f.ctx, a.ID)
	require.NoError(t, err)
	require.Empty(t, got)
}
