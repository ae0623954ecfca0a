package engines_test

import (
	"context"
	"iter"
	"reflect"

	"github.com/astrabox/astrabox/engines"
)

// testAdapter is a configurable adapter for registry and validation tests.
type testAdapter struct {
	caps       engines.EngineRuntimeCapabilities
	clientType reflect.Type
	sandbox    engines.EngineSandboxRequest
	material   engines.EngineStartupMaterialRequest
}

func (a *testAdapter) Capabilities() engines.EngineRuntimeCapabilities { return a.caps }
func (a *testAdapter) EngineClientType() reflect.Type                  { return a.clientType }
func (a *testAdapter) SandboxRequest() engines.EngineSandboxRequest    { return a.sandbox }
func (a *testAdapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return a.material
}
func (a *testAdapter) ActivateRuntime(context.Context, engines.EngineStartupContext, engines.Box) (engines.SessionRuntime, error) {
	return engines.SessionRuntime{}, nil
}

// pinnedAdapter pins a seams API version.
type pinnedAdapter struct {
	*testAdapter
	version int
}

func (a pinnedAdapter) SeamsAPIVersion() int { return a.version }

var _ engines.EngineAdapter = (*testAdapter)(nil)
var _ engines.SeamsAPIVersioned = pinnedAdapter{}

// validCaps returns a complete declaration for kind.
func validCaps(kind string) engines.EngineRuntimeCapabilities {
	return engines.EngineRuntimeCapabilities{
		EngineKind:            kind,
		SupportedSessionKinds: []engines.SessionKind{engines.SessionKindAgentChat},
		Workload: engines.EngineWorkloadDeclaration{
			ConfigDirName: ".example", ConfigDirEnv: "EXAMPLE_HOME", RequiredCommands: []string{"example"},
		},
		ConversationPlacement:  engines.PlacementPerConversationAccount,
		DefaultRuntimeImage:    "example:1",
		PermissionModes:        []string{"default", "acceptEdits"},
		PermissionModeDefaults: map[engines.SessionKind]string{engines.SessionKindAgentChat: "default"},
		Extensions: engines.EngineExtensions{
			MCPTransports:      []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportHTTP},
			Skills:             &engines.SkillsDiscovery{Directories: []string{"skills"}},
			NativePackageKinds: []string{"plugin"},
			NativeConfigDocuments: []engines.NativeConfigDocument{
				{Name: "settings.json", ProtectedKeys: []string{"permissions", "env"}},
			},
		},
		SupportsServerInfo: true,
	}
}

func validAdapter(kind string) *testAdapter {
	return &testAdapter{
		caps:       validCaps(kind),
		clientType: reflect.TypeFor[*fullClient](),
		sandbox: engines.EngineSandboxRequest{
			EntryPoint:               []string{"/usr/local/bin/example-runner"},
			ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: "EXAMPLE_API_KEY", BaseURLEnv: "EXAMPLE_BASE_URL"},
			WorkingDirectoryVariable: "EXAMPLE_CWD",
			PublishedPorts:           []engines.PublishedPort{{Name: "control", Port: 7000}},
			ReadinessPort:            7000,
		},
		material: engines.EngineStartupMaterialRequest{Secrets: []string{"example-token"}},
	}
}

// bareClient implements only the required runtime contract.
type bareClient struct {
	kind, key string
	live      bool
	manifest  engines.EngineCapabilityManifest
}

func (c *bareClient) EngineKind() string                                 { return c.kind }
func (c *bareClient) IsLive() bool                                       { return c.live }
func (c *bareClient) EngineSessionKey() string                           { return c.key }
func (c *bareClient) Submit(context.Context, engines.RuntimeInput) error { return nil }
func (c *bareClient) Events(context.Context, *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(func(engines.Event, error) bool) {}
}
func (c *bareClient) State(context.Context) (engines.RuntimeState, error) {
	return engines.RuntimeState{}, nil
}
func (c *bareClient) Answer(context.Context, string, engines.InteractionAnswer) error {
	return nil
}
func (c *bareClient) Interrupt(context.Context, bool) error                  { return nil }
func (c *bareClient) Committed(context.Context, engines.RuntimeCursor) error { return nil }
func (c *bareClient) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return c.manifest, nil
}
func (c *bareClient) Close() error { c.live = false; return nil }

// fullClient adds every optional member.
type fullClient struct{ bareClient }

func (c *fullClient) SetPermissionMode(context.Context, string) error { return nil }
func (c *fullClient) StopChildRun(context.Context, string) error      { return nil }
func (c *fullClient) ServerInfo(context.Context) (engines.ServerInfo, error) {
	return engines.ServerInfo{}, nil
}

// noCloseClient lacks Close.
type noCloseClient struct{}

func (noCloseClient) EngineKind() string                                 { return "" }
func (noCloseClient) IsLive() bool                                       { return false }
func (noCloseClient) EngineSessionKey() string                           { return "" }
func (noCloseClient) Submit(context.Context, engines.RuntimeInput) error { return nil }
func (noCloseClient) Events(context.Context, *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return nil
}
func (noCloseClient) State(context.Context) (engines.RuntimeState, error) {
	return engines.RuntimeState{}, nil
}
func (noCloseClient) Answer(context.Context, string, engines.InteractionAnswer) error {
	return nil
}
func (noCloseClient) Interrupt(context.Context, bool) error                  { return nil }
func (noCloseClient) Committed(context.Context, engines.RuntimeCursor) error { return nil }
func (noCloseClient) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{}, nil
}

// wrongServerInfoClient has a ServerInfo method with the wrong signature.
type wrongServerInfoClient struct{ bareClient }

func (c *wrongServerInfoClient) ServerInfo() engines.ServerInfo { return engines.ServerInfo{} }

var (
	_ engines.RuntimeClient        = (*bareClient)(nil)
	_ engines.PermissionModeSetter = (*fullClient)(nil)
	_ engines.ChildRunStopper      = (*fullClient)(nil)
	_ engines.ServerInfoProvider   = (*fullClient)(nil)
)
