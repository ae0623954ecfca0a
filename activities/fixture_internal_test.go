package activities

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// scriptedSessions makes a user and an Agent of the scripted program in st and
// returns a function that opens a new Session of theirs.
func scriptedSessions(ctx context.Context, t testing.TB, st *store.Store) func() store.Session {
	t.Helper()
	user, err := st.CreateUser(ctx, store.NewUser{Email: uuid.NewString() + "@example.com"})
	require.NoError(t, err)
	profile, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: "p-" + uuid.NewString(), EngineKind: "scripted", Enabled: true, SandboxBackend: store.SandboxLocal})
	require.NoError(t, err)
	agent, err := st.CreateAgent(ctx, store.NewAgent{Name: "a-" + uuid.NewString(), EngineKind: "scripted", RuntimeProfileID: profile.ID})
	require.NoError(t, err)
	return func() store.Session {
		sess, _, err := st.CreateSessionIdempotent(ctx, store.NewSession{UserID: user.ID, AgentID: agent.ID})
		require.NoError(t, err)
		return sess
	}
}
