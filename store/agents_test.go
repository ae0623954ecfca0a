package store_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

func TestRuntimeProfiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	disabled, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{
		Name: uniq("off"), EngineKind: "codex", SandboxBackend: store.SandboxOpenSandbox,
		Resources: json.RawMessage(`{"cpu":"2"}`), PrewarmSize: 2,
	})
	require.NoError(t, err)
	got, err := st.GetRuntimeProfileByID(ctx, disabled.ID)
	require.NoError(t, err)
	require.False(t, got.Enabled)
	require.JSONEq(t, `{"cpu":"2"}`, string(got.Resources))
	require.JSONEq(t, `{}`, string(got.Tracing))
	require.Equal(t, store.TenancyConversation, got.SandboxTenancy)

	enabled, err := st.ListRuntimeProfiles(ctx, true)
	require.NoError(t, err)
	require.Len(t, enabled, 1)
	all, err := st.ListRuntimeProfiles(ctx, false)
	require.NoError(t, err)
	require.Len(t, all, 2)

	require.NoError(t, st.SetRuntimeProfileEnabled(ctx, disabled.ID, true))
	enabled, err = st.ListRuntimeProfiles(ctx, true)
	require.NoError(t, err)
	require.Len(t, enabled, 2)
	require.ErrorIs(t, st.SetRuntimeProfileEnabled(ctx, "00000000-0000-0000-0000-000000000000", true), store.ErrNotFound)

	_, err = st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: uniq("bad"), EngineKind: "claude", SandboxBackend: "docker"})
	require.Error(t, err, "sandbox_backend is a closed vocabulary")
	_, err = st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: f.profile.Name, EngineKind: "claude", SandboxBackend: store.SandboxLocal})
	require.ErrorIs(t, err, store.ErrDuplicate)
	require.Nil(t, got.ACPProgram, "a profile defines no program unless given one")

	defined, err := st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: uniq("acp"), EngineKind: "acp", SandboxBackend: store.SandboxLocal,
		ACPProgram: json.RawMessage(`{"command":["my-agent"],"busy":"queued"}`)})
	require.NoError(t, err)
	got, err = st.GetRuntimeProfileByID(ctx, defined.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"command":["my-agent"],"busy":"queued"}`, string(got.ACPProgram))
	saved, err := st.UpdateRuntimeProfile(ctx, defined.ID, store.RuntimeProfileUpdate{ACPProgram: json.RawMessage(`{"command":["other"]}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"command":["other"]}`, string(saved.ACPProgram))
	require.True(t, saved.UpdatedAt.After(got.UpdatedAt) || saved.UpdatedAt.Equal(got.UpdatedAt))
	_, err = st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: uniq("acp"), EngineKind: "acp", SandboxBackend: store.SandboxLocal,
		ACPProgram: json.RawMessage(`["my-agent"]`)})
	require.Error(t, err, "a program is a JSON object")
}

func TestAgentsOptimisticConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, st := f.ctx, f.st

	got, err := st.GetAgentByID(ctx, f.agent.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Version)
	require.Equal(t, "default", *got.PermissionMode)
	require.JSONEq(t, `{}`, string(got.Config))

	// Eight writers save from version 1 at once: exactly one wins.
	const writers = 8
	var wg sync.WaitGroup
	wins, conflicts := make(chan store.Agent, writers), make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			desc := uniq("desc")
			a, err := st.UpdateAgent(ctx, f.agent.ID, 1, store.AgentUpdate{Description: &desc, Config: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)})
			if err != nil {
				conflicts <- err
				return
			}
			wins <- a
		})
	}
	wg.Wait()
	close(wins)
	close(conflicts)
	require.Len(t, wins, 1)
	require.Len(t, conflicts, writers-1)
	for err := range conflicts {
		require.ErrorIs(t, err, store.ErrVersionConflict)
	}
	winner := <-wins
	require.Equal(t, int64(2), winner.Version)

	cleared, err := st.UpdateAgent(ctx, f.agent.ID, 2, store.AgentUpdate{PermissionMode: ptr("")})
	require.NoError(t, err)
	require.Nil(t, cleared.PermissionMode)
	require.Equal(t, int64(3), cleared.Version)
	require.Equal(t, winner.Description, cleared.Description, "unset fields stay")

	_, err = st.UpdateAgent(ctx, "00000000-0000-0000-0000-000000000000", 1, store.AgentUpdate{})
	require.ErrorIs(t, err, store.ErrNotFound)

	// An Agent runs the engine its RuntimeProfile selects.
	_, err = st.CreateAgent(ctx, store.NewAgent{Name: uniq("mismatch"), EngineKind: "codex", RuntimeProfileID: f.profile.ID})
	require.Error(t, err)
	require.True(t, errors.Is(err, store.ErrNotFound))

	list, err := st.ListAgents(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
}
