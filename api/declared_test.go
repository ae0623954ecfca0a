package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestNewSessionStartsInTheEnginesDefaultModeWhenTheAgentSetsNone: a Session of an
// Agent with no permission mode starts in the mode the engine declares for its kind
// (PermissionModeDefaults); an Agent's own mode wins.
func TestNewSessionStartsInTheEnginesDefaultModeWhenTheAgentSetsNone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bare, err := f.st.CreateAgent(f.ctx, store.NewAgent{Name: "no-mode", EngineKind: testEngine, RuntimeProfileID: f.profile.ID, CreatedBy: &f.adminID})
	require.NoError(t, err)
	require.Nil(t, bare.PermissionMode)
	var created createdSession
	f.call("POST", "/api/v1/agents/"+bare.ID+"/conversations", f.member, "{}").ok(t).into(t, &created)
	d := f.session(created.SessionID, f.member)
	require.NotNil(t, d.PermissionMode)
	require.Equal(t, testCaps(testEngine, "agent_chat").PermissionModeDefaults["agent_chat"], *d.PermissionMode)

	plan := "plan"
	chosen, err := f.st.CreateAgent(f.ctx, store.NewAgent{Name: "plans", EngineKind: testEngine, RuntimeProfileID: f.profile.ID, PermissionMode: &plan, CreatedBy: &f.adminID})
	require.NoError(t, err)
	f.call("POST", "/api/v1/agents/"+chosen.ID+"/conversations", f.member, "{}").ok(t).into(t, &created)
	require.Equal(t, "plan", *f.session(created.SessionID, f.member).PermissionMode)
}
