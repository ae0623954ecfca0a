package activities

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
)

// TestRuntimeIdentityPerTenancyAndSessionKind: the identity depends on both the
// tenancy and the Session kind, per the one set of rules composeIdentity documents.
func TestRuntimeIdentityPerTenancyAndSessionKind(t *testing.T) {
	const sid = "0f3c9a1e-77aa-4bcd-9e01-23456789abcd"
	for _, kind := range []engines.SessionKind{engines.SessionKindAgentChat, engines.SessionKindAssistantChat} {
		id, err := composeIdentity(engines.TenancyConversation, kind, sid)
		require.NoError(t, err)
		require.Equal(t, engines.RuntimeIdentity{Account: "agent", HomeDir: "/workspace/.home", WorkspaceDir: "/workspace",
			SourceDir: "/workspace", FileRoot: "/workspace", CacheDir: "/workspace/.home/.cache", TempDir: "/tmp"}, *id, kind)
	}
	agent, err := composeIdentity(engines.TenancyShared, engines.SessionKindAgentChat, sid)
	require.NoError(t, err)
	require.Equal(t, engines.RuntimeIdentity{Account: "ag-0f3c9a1e77aa", HomeDir: "/home/ag-0f3c9a1e77aa",
		WorkspaceDir: "/workspace/conversations/" + sid, SourceDir: "/workspace/conversations/" + sid, FileRoot: "/workspace/conversations/" + sid,
		CacheDir: "/home/ag-0f3c9a1e77aa/.cache", TempDir: "/tmp/ag-0f3c9a1e77aa"}, *agent)
	assistant, err := composeIdentity(engines.TenancyShared, engines.SessionKindAssistantChat, sid)
	require.NoError(t, err)
	require.Equal(t, "as-0f3c9a1e77aa", assistant.Account)
	require.Equal(t, "/workspace/assistant", assistant.WorkspaceDir)
	for _, id := range []*engines.RuntimeIdentity{agent, assistant} {
		require.NoError(t, id.Validate())
		require.NoError(t, sandbox.Spec{Identity: sandbox.Identity{Account: id.Account, Home: id.HomeDir}}.WithDefaults().Validate(), "a valid account name")
	}
	_, err = composeIdentity("pooled", engines.SessionKindAgentChat, sid)
	require.ErrorContains(t, err, `unknown sandbox tenancy "pooled"`)
}

// TestSharedTenancyNeedsIsolationAndPerConversationAccounts: checkTenancy refuses
// shared tenancy on a backend without isolated sessions, or for an engine running as
// the box account, and conversation tenancy of a process-session engine on a backend
// without process sessions.
func TestSharedTenancyNeedsIsolationAndPerConversationAccounts(t *testing.T) {
	perConversation := engines.EngineRuntimeCapabilities{EngineKind: "x", ConversationPlacement: engines.PlacementPerConversationAccount}
	boxAccount := engines.EngineRuntimeCapabilities{EngineKind: "x", ConversationPlacement: engines.PlacementBoxAccount}
	require.NoError(t, checkTenancy(engines.TenancyConversation, "local", sandbox.Capabilities{}, boxAccount))
	process := engines.EngineRuntimeCapabilities{EngineKind: "x", RequiresProcessSessions: true}
	require.ErrorContains(t, checkTenancy(engines.TenancyConversation, "os", sandbox.Capabilities{}, process),
		`runs as a process session in its box, which the sandbox backend "os" does not support`)
	require.NoError(t, checkTenancy(engines.TenancyConversation, "local", sandbox.Capabilities{ProcessSessions: true}, process))
	require.ErrorContains(t, checkTenancy(engines.TenancyShared, "local", sandbox.Capabilities{IsolatedAccounts: true}, perConversation),
		`sandbox backend "local" cannot isolate conversations in one box`)
	require.ErrorContains(t, checkTenancy(engines.TenancyShared, "os", sandbox.Capabilities{IsolatedSessions: true}, boxAccount),
		"runs as the box account")
	require.NoError(t, checkTenancy(engines.TenancyShared, "os", sandbox.Capabilities{IsolatedSessions: true}, perConversation))
}
