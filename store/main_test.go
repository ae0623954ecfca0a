package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// fixture is one user, RuntimeProfile, Agent and Session in a fresh database.
type fixture struct {
	st      *store.Store
	dsn     string
	ctx     context.Context
	user    store.User
	profile store.RuntimeProfile
	agent   store.Agent
	session store.Session
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, dsn := testutil.NewDB(t)
	ctx := testutil.Context(t)
	f := &fixture{st: st, dsn: dsn, ctx: ctx}
	var err error
	f.user, err = st.CreateUser(ctx, store.NewUser{Email: uniq("user") + "@example.com"})
	require.NoError(t, err)
	f.profile, err = st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{
		Name: uniq("profile"), EngineKind: "claude", Enabled: true, SandboxBackend: store.SandboxLocal,
	})
	require.NoError(t, err)
	mode := "default"
	f.agent, err = st.CreateAgent(ctx, store.NewAgent{
		Name: uniq("agent"), EngineKind: "claude", RuntimeProfileID: f.profile.ID, PermissionMode: &mode,
	})
	require.NoError(t, err)
	f.session, _, err = st.CreateSessionIdempotent(ctx, store.NewSession{UserID: f.user.ID, AgentID: f.agent.ID})
	require.NoError(t, err)
	return f
}

// input accepts an input of content into the fixture's Session.
func (f *fixture) input(t *testing.T, content string) store.Input {
	t.Helper()
	in, _, err := f.st.InsertInput(f.ctx, store.NewInput{SessionID: f.session.ID, Content: content})
	require.NoError(t, err)
	return in
}

// uniq returns a name no other test uses, so tests can share tables in parallel.
func uniq(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }
