package engines_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/engines"
)

func TestRegisterValidAdapter(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register("example", validAdapter("example")))
	require.NoError(t, reg.Register("other", validAdapter("other")))
	require.Equal(t, []string{"example", "other"}, reg.Kinds())
	a, ok := reg.Adapter("example")
	require.True(t, ok)
	require.Equal(t, "example", a.Capabilities().EngineKind)
	_, ok = reg.Adapter("missing")
	require.False(t, ok)
}

func TestRegisterPinnedToCurrentSeamsVersion(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register("example", pinnedAdapter{validAdapter("example"), engines.SeamsAPIVersion}))
}

func TestRegisterRejectsDuplicateKind(t *testing.T) {
	t.Parallel()
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register("example", validAdapter("example")))
	err := reg.Register("example", validAdapter("example"))
	requireProblem(t, err, "example", "engine_kind", "already registered")
	require.Equal(t, []string{"example"}, reg.Kinds())
}

// TestRegisterRejects covers every registration failure: each case breaks one thing in
// a valid adapter and expects start-up to fail naming the adapter, the field and why.
func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		regAs  string
		breakA func(a *testAdapter) engines.EngineAdapter
		field  string
		want   string
	}{
		{"name does not match engine_kind", "claude", func(a *testAdapter) engines.EngineAdapter { return a }, "engine_kind", `does not match the registration name "claude"`},
		{"empty name", "", func(a *testAdapter) engines.EngineAdapter { a.caps.EngineKind = ""; return a }, "name", "registration name is empty"},
		{"nil adapter", "example", func(*testAdapter) engines.EngineAdapter { return nil }, "", "adapter is nil"},
		{"seams version 6", "example", func(a *testAdapter) engines.EngineAdapter { return pinnedAdapter{a, 6} }, "seams_api_version", "pins seams API version 6"},
		{"seams version 8", "example", func(a *testAdapter) engines.EngineAdapter { return pinnedAdapter{a, 8} }, "seams_api_version", "this AstraBox serves 7"},
		{"no session kinds", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.SupportedSessionKinds = nil; return a }, "supported_session_kinds", "declares no Session kind"},
		{"unknown session kind", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.SupportedSessionKinds = []engines.SessionKind{"agent_chat", "batch"}
			return a
		}, "supported_session_kinds[1]", `unknown Session kind "batch"`},
		{"no config dir name", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.Workload.ConfigDirName = ""; return a }, "workload.config_dir_name", "is empty"},
		{"no config dir env", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.Workload.ConfigDirEnv = ""; return a }, "workload.config_dir_env", "is empty"},
		{"no required commands", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.Workload.RequiredCommands = nil; return a }, "workload.required_commands", "names no command"},
		{"bad placement", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.ConversationPlacement = "anywhere"; return a }, "conversation_placement", `"anywhere"`},
		{"duplicate permission mode", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.PermissionModes = []string{"default", "default"}
			return a
		}, "permission_modes[1]", "listed twice"},
		{"default not a mode", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.PermissionModeDefaults = map[engines.SessionKind]string{engines.SessionKindAgentChat: "yolo"}
			return a
		}, "permission_mode_defaults.agent_chat", `"yolo" is not a declared permission mode`},
		{"missing default", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.PermissionModeDefaults = nil; return a }, "permission_mode_defaults.agent_chat", "has no default"},
		{"default for unsupported kind", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.PermissionModeDefaults[engines.SessionKindAssistantChat] = "default"
			return a
		}, "permission_mode_defaults.assistant_chat", "is not supported"},
		{"unknown MCP transport", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.Extensions.MCPTransports = []engines.MCPTransport{"websocket"}
			return a
		}, "extensions.mcp_transports[0]", `unknown MCP transport "websocket"`},
		{"skills without directory", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.Extensions.Skills = &engines.SkillsDiscovery{}
			return a
		}, "extensions.skills.directories", "without a directory"},
		{"instructions file outside the configuration directory", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.Extensions.InstructionsFile = "../AGENTS.md"
			return a
		}, "extensions.instructions_file", "relative to the configuration directory"},
		{"empty package kind", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.Extensions.NativePackageKinds = []string{""}
			return a
		}, "extensions.native_package_kinds[0]", "is empty"},
		{"duplicate config document", "example", func(a *testAdapter) engines.EngineAdapter {
			d := a.caps.Extensions.NativeConfigDocuments[0]
			a.caps.Extensions.NativeConfigDocuments = append(a.caps.Extensions.NativeConfigDocuments, d)
			return a
		}, "extensions.native_config_documents[1]", "listed twice"},
		{"empty session log pattern", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.SessionLog = &engines.SessionLogDeclaration{}
			return a
		}, "session_log.path_pattern", "is empty"},
		{"bad runtime state scope", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.RuntimeStateScope = "box"; return a }, "runtime_state_scope", `"box"`},
		{"session scope without state", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.RuntimeStateScope = engines.RuntimeStateScopeSession
			return a
		}, "runtime_state_scope", "without runtime_state_store"},
		{"runtime state store without material", "example", func(a *testAdapter) engines.EngineAdapter { a.caps.RuntimeStateStore = true; return a }, "runtime_state_store", "does not ask for runtime state storage"},
		{"runtime state store without a saver", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.RuntimeStateStore = true
			a.material.RuntimeStateStorage = true
			return a
		}, "engine_client_type", "RuntimeStateSaver (the engine declares runtime_state_store)"},
		{"empty entry point program", "example", func(a *testAdapter) engines.EngineAdapter { a.sandbox.EntryPoint = []string{""}; return a }, "sandbox_request", "entry point names no program"},
		{"readiness port without entry point", "example", func(a *testAdapter) engines.EngineAdapter { a.sandbox.EntryPoint = nil; return a }, "sandbox_request", "readiness port 7000 declared without an entry point"},
		{"no model credential destination", "example", func(a *testAdapter) engines.EngineAdapter {
			a.sandbox.ModelCredential = engines.ModelCredentialDestination{}
			return a
		}, "sandbox_request", "no model-credential destination"},
		{"no working directory variable", "example", func(a *testAdapter) engines.EngineAdapter { a.sandbox.WorkingDirectoryVariable = ""; return a }, "sandbox_request", "no working-directory variable"},
		{"readiness port not published", "example", func(a *testAdapter) engines.EngineAdapter { a.sandbox.ReadinessPort = 7001; return a }, "sandbox_request", "readiness port 7001 is not a published port"},
		{"invalid port", "example", func(a *testAdapter) engines.EngineAdapter {
			a.sandbox.PublishedPorts = append(a.sandbox.PublishedPorts, engines.PublishedPort{Name: "x", Port: 70000})
			return a
		}, "sandbox_request", "invalid number 70000"},
		{"duplicate secret", "example", func(a *testAdapter) engines.EngineAdapter {
			a.material.Secrets = []string{"s", "s"}
			return a
		}, "startup_material_request", `secret "s" requested twice`},
		{"interface client type", "example", func(a *testAdapter) engines.EngineAdapter {
			a.clientType = reflect.TypeFor[engines.RuntimeClient]()
			return a
		}, "engine_client_type", "declare the concrete client type"},
		{"nil pointer adapter", "example", func(*testAdapter) engines.EngineAdapter { return (*testAdapter)(nil) }, "", "panicked during validation"},
		{"no client type", "example", func(a *testAdapter) engines.EngineAdapter { a.clientType = nil; return a }, "engine_client_type", "no runtime client type declared"},
		{"client type missing Close", "example", func(a *testAdapter) engines.EngineAdapter {
			a.clientType = reflect.TypeFor[noCloseClient]()
			return a
		}, "engine_client_type", "missing Close() error"},
		{"client value type with pointer methods", "example", func(a *testAdapter) engines.EngineAdapter {
			a.clientType = reflect.TypeFor[fullClient]()
			return a
		}, "engine_client_type", "declare the pointer type"},
		{"permission modes without setter", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.SupportsServerInfo = false
			a.clientType = reflect.TypeFor[*bareClient]()
			return a
		}, "engine_client_type", "PermissionModeSetter"},
		{"server info without provider", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.PermissionModes, a.caps.PermissionModeDefaults = nil, nil
			a.clientType = reflect.TypeFor[*wrongServerInfoClient]()
			return a
		}, "engine_client_type", "ServerInfo has signature func() engines.ServerInfo"},
		{"child run stop without stopper", "example", func(a *testAdapter) engines.EngineAdapter {
			a.caps.PermissionModes, a.caps.PermissionModeDefaults, a.caps.SupportsServerInfo = nil, nil, false
			a.caps.SupportsChildRunStop = true
			a.clientType = reflect.TypeFor[*bareClient]()
			return a
		}, "engine_client_type", "ChildRunStopper"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			adapter := tc.breakA(validAdapter("example"))
			err := engines.NewRegistry().Register(tc.regAs, adapter)
			requireProblem(t, err, tc.regAs, tc.field, tc.want)
		})
	}
}

func TestRegisterRejectsUnstableCapabilities(t *testing.T) {
	t.Parallel()
	err := engines.NewRegistry().Register("example", &flakyAdapter{testAdapter: validAdapter("example")})
	requireProblem(t, err, "example", "capabilities", "different declaration on each call")
}

// flakyAdapter returns a different declaration on each call.
type flakyAdapter struct {
	*testAdapter
	calls int
}

func (a *flakyAdapter) Capabilities() engines.EngineRuntimeCapabilities {
	a.calls++
	c := a.testAdapter.Capabilities()
	c.Workload.RequiredCommands = append([]string{"example"}, strings.Repeat("x", a.calls))
	return c
}

// requireProblem checks that err is a *ValidationError naming the adapter registration
// and a problem on field whose message contains want.
func requireProblem(t *testing.T, err error, name, field, want string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, engines.ErrInvalid)
	var ve *engines.ValidationError
	require.True(t, errors.As(err, &ve), "error %T is not a *ValidationError", err)
	require.Contains(t, err.Error(), `engine adapter "`+name+`"`, "the message must name the adapter")
	for _, p := range ve.Problems {
		if p.Field == field && strings.Contains(p.Message, want) {
			return
		}
	}
	t.Fatalf("no problem on %q containing %q in: %v", field, want, err)
}

// TestSessionLogPath puts the conversation id, or its first 8 characters, in place of
// the placeholders of a session log's path pattern.
func TestSessionLogPath(t *testing.T) {
	t.Parallel()
	key := "298d46cd-6550-4da2-9379-41116c359135"
	require.Equal(t, "projects/*/"+key+".jsonl", engines.SessionLogPath("projects/*/{engine_session_key}.jsonl", key))
	require.Equal(t, "tmp/*/chats/session-*-298d46cd.jsonl", engines.SessionLogPath("tmp/*/chats/session-*-{engine_session_key_8}.jsonl", key))
	require.Equal(t, "short-ab.jsonl", engines.SessionLogPath("short-{engine_session_key_8}.jsonl", "ab"))
}
