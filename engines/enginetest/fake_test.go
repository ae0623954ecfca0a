package enginetest_test

// A small fake engine, only as a fixture for the suites' own tests: a valid adapter and
// client over an in-memory event log, and deliberately broken variants.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/engines"
)

const fakeKind = "fake"

type fakeAdapter struct {
	caps       engines.EngineRuntimeCapabilities
	clientType reflect.Type
	sandbox    engines.EngineSandboxRequest
}

func newFakeAdapter() *fakeAdapter {
	return &fakeAdapter{
		caps: engines.EngineRuntimeCapabilities{
			EngineKind:             fakeKind,
			SupportedSessionKinds:  []engines.SessionKind{engines.SessionKindAgentChat, engines.SessionKindAssistantChat},
			Workload:               engines.EngineWorkloadDeclaration{ConfigDirName: ".fake", ConfigDirEnv: "FAKE_HOME", RequiredCommands: []string{"fake"}},
			ConversationPlacement:  engines.PlacementPerConversationAccount,
			DefaultRuntimeImage:    "fake:1",
			PermissionModes:        []string{"ask", "auto"},
			PermissionModeDefaults: map[engines.SessionKind]string{engines.SessionKindAgentChat: "ask", engines.SessionKindAssistantChat: "auto"},
			Extensions:             engines.EngineExtensions{MCPTransports: []engines.MCPTransport{engines.MCPTransportStdio}},
			SessionLog:             &engines.SessionLogDeclaration{PathPattern: "sessions/{engine_session_key}.jsonl"},
			SupportsServerInfo:     true,
		},
		clientType: reflect.TypeFor[*fakeClient](),
		sandbox: engines.EngineSandboxRequest{
			EntryPoint:               []string{"/usr/bin/fake-runner"},
			ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: "FAKE_API_KEY", BaseURLEnv: "FAKE_BASE_URL"},
			WorkingDirectoryVariable: "FAKE_CWD",
			Environment:              map[string]string{"FAKE_OFFLINE": "1"},
		},
	}
}

func (a *fakeAdapter) Capabilities() engines.EngineRuntimeCapabilities { return a.caps }
func (a *fakeAdapter) EngineClientType() reflect.Type                  { return a.clientType }
func (a *fakeAdapter) SandboxRequest() engines.EngineSandboxRequest    { return a.sandbox }
func (a *fakeAdapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{}
}
func (a *fakeAdapter) ActivateRuntime(ctx context.Context, sc engines.EngineStartupContext, _ engines.Box) (engines.SessionRuntime, error) {
	key := sc.ResumeSessionKey
	if key == "" {
		key = "conv-" + sc.SessionID
	}
	c := newFakeClient(key, fakeLog(nil))
	m, err := engines.InitializeRuntimeClient(ctx, c, a.caps, sc.ResumeSessionKey)
	if err != nil {
		return engines.SessionRuntime{}, err
	}
	return engines.SessionRuntime{EngineClient: c, EngineManifest: m}, nil
}

// serviceAdapter adds a shared-conversation service launch.
type serviceAdapter struct {
	*fakeAdapter
	launch engines.ConversationServiceLaunch
}

func (a serviceAdapter) SharedConversationServiceLaunch(engines.EngineStartupContext) (engines.ConversationServiceLaunch, error) {
	return a.launch, nil
}

// fakeLog builds a deterministic event log: cursor position n is the event's index.
func fakeLog(t testing.TB) []engines.Event {
	c := func(n int) engines.RuntimeCursor {
		return engines.RuntimeCursor{Generation: "fake-gen-1", Position: json.RawMessage(fmt.Sprint(n))}
	}
	meta := engines.ResponseMetadata{ResponseID: "resp-1", InputIDs: []string{"in-1"}, Origin: engines.OriginInput}
	return []engines.Event{
		engines.StatusChanged{Cursor: c(0), Status: engines.StatusWorking},
		engines.InputAdmitted{Cursor: c(1), InputID: "in-1"},
		engines.ResponseStarted{Cursor: c(2), ResponseID: "resp-1", Origin: engines.OriginInput, InputIDs: []string{"in-1"}},
		engines.NewResponseOutput(c(3), "resp-1", engines.ResponseStartFrame(meta)),
		engines.NewResponseOutput(c(4), "resp-1", engines.MustFrame(engines.ToolInputAvailableChunk{ToolCallID: "t1", ToolName: "shell", Input: json.RawMessage(`{"cmd":"ls"}`)})),
		engines.NewResponseOutput(c(5), "resp-1", engines.MustFrame(engines.ToolOutputAvailableChunk{ToolCallID: "t1", Output: json.RawMessage(`"ok"`)})),
		engines.NewResponseOutput(c(6), "resp-1", engines.ResponseEndFrames(engines.ResponseEnded{Outcome: engines.OutcomeCompleted})[0]),
		engines.ResponseEnded{Cursor: c(7), ResponseID: "resp-1", Outcome: engines.OutcomeCompleted, NativeReason: "end_turn"},
		engines.StatusChanged{Cursor: c(8), Status: engines.StatusIdle},
	}
}

// fakeClient serves the fake log: Events replays after a cursor, then follows until
// its context ends.
type fakeClient struct {
	mu   sync.Mutex
	key  string
	live bool
	log  []engines.Event
	// read lets broken variants change how a cursor is resumed.
	read func(log []engines.Event, start int) []engines.Event
	// once makes Events end after the replay instead of following.
	once bool
}

func newFakeClient(key string, log []engines.Event) *fakeClient {
	return &fakeClient{key: key, live: true, log: log, read: func(log []engines.Event, start int) []engines.Event { return log[start:] }}
}

func (c *fakeClient) EngineKind() string { return fakeKind }
func (c *fakeClient) IsLive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}
func (c *fakeClient) EngineSessionKey() string                           { return c.key }
func (c *fakeClient) Submit(context.Context, engines.RuntimeInput) error { return nil }
func (c *fakeClient) Events(ctx context.Context, after *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(yield func(engines.Event, error) bool) {
		start := 0
		if after != nil {
			var pos int
			if after.Generation != "fake-gen-1" || after.DecodePosition(&pos) != nil || pos >= len(c.log) {
				yield(nil, &engines.RuntimeCursorExpired{Cursor: *after, Reason: "not in this generation"})
				return
			}
			start = pos + 1
		}
		for _, ev := range c.read(c.log, start) {
			if ctx.Err() != nil || !yield(ev, nil) {
				return
			}
		}
		if !c.once {
			<-ctx.Done()
		}
	}
}
func (c *fakeClient) State(context.Context) (engines.RuntimeState, error) {
	return engines.RuntimeState{Status: engines.StatusIdle}, nil
}
func (c *fakeClient) Answer(_ context.Context, id string, _ engines.InteractionAnswer) error {
	return &engines.InteractionNotOpen{InteractionID: id}
}
func (c *fakeClient) Interrupt(context.Context, bool) error                  { return nil }
func (c *fakeClient) Committed(context.Context, engines.RuntimeCursor) error { return nil }
func (c *fakeClient) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{EngineKind: fakeKind, PermissionModes: []string{"auto", "ask"},
		InputContentTypes: []engines.InputContentType{engines.InputText}, Controls: []engines.Control{engines.ControlInterrupt}}, nil
}
func (c *fakeClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = false
	return nil
}
func (c *fakeClient) SetPermissionMode(context.Context, string) error { return nil }
func (c *fakeClient) ServerInfo(context.Context) (engines.ServerInfo, error) {
	return engines.ServerInfo{}, nil
}

var (
	_ engines.EngineAdapter                     = (*fakeAdapter)(nil)
	_ engines.SharedConversationServiceLauncher = serviceAdapter{}
	_ engines.RuntimeClient                     = (*fakeClient)(nil)
	_ engines.PermissionModeSetter              = (*fakeClient)(nil)
	_ engines.ServerInfoProvider                = (*fakeClient)(nil)
)

// minimalClient serves only the required contract, none of the optional members the
// fake adapter declares.
type minimalClient struct{ engines.RuntimeClient }

// wrongSignatureClient's SetPermissionMode has the wrong signature, so it would never
// be called.
type wrongSignatureClient struct{ *fakeClient }

func (wrongSignatureClient) SetPermissionMode(string) {}

// stubbornClient ignores context cancellation in Events and stays live after Close.
type stubbornClient struct {
	*fakeClient
	release chan struct{}
}

func (c *stubbornClient) Events(context.Context, *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(func(engines.Event, error) bool) { <-c.release }
}
func (c *stubbornClient) Close() error { return nil }
func (c *stubbornClient) IsLive() bool { return true }
