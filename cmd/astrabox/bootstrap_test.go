package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// TestBootstrapAdmin gives a new deployment its first administrator from the database,
// and refuses to turn a member into one.
func TestBootstrapAdmin(t *testing.T) {
	st, dsn := testutil.NewDB(t)
	ctx := testutil.Context(t)
	bin := buildAstrabox(t)
	env := databaseEnv(t, dsn)

	var first struct {
		UserID string `json:"user_id"`
		Secret string `json:"secret"`
	}
	out, code := run(t, bin, env, "users", "bootstrap-admin", "ops@example.test", "--token-name", "first", "--json")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &first), out)
	user, tok, err := st.GetUserByAPIToken(ctx, first.Secret, time.Now())
	require.NoError(t, err)
	assert.True(t, user.IsAdmin())
	assert.Equal(t, "first", tok.Name)

	// Again: the same administrator, a new token.
	out, code = run(t, bin, env, "users", "bootstrap-admin", "OPS@example.test", "--expires-in", "1h")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, first.UserID)
	assert.Contains(t, out, "secret (shown once): abx_")
	tokens, err := st.ListAPITokensByUser(ctx, first.UserID)
	require.NoError(t, err)
	assert.Len(t, tokens, 2)

	_, err = st.CreateUser(ctx, store.NewUser{Email: "member@example.test"})
	require.NoError(t, err)
	out, code = run(t, bin, env, "users", "bootstrap-admin", "member@example.test")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "not an active administrator")
	out, code = run(t, bin, env, "users", "bootstrap-admin", "no-address")
	assert.Equal(t, 2, code, out)
}
