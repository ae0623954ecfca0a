package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
	"github.com/astrabox/astrabox/workflows"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// testEngine is the engine kind of the test adapter.
const testEngine = "testengine"

// testAdapter is a small engine adapter for API tests: it declares permission modes,
// stdio MCP servers, Skills, a plugin package kind and no tracing.
type testAdapter struct {
	caps engines.EngineRuntimeCapabilities
}

func (a *testAdapter) Capabilities() engines.EngineRuntimeCapabilities { return a.caps }
func (a *testAdapter) EngineClientType() reflect.Type                  { return reflect.TypeFor[*testClient]() }
func (a *testAdapter) SandboxRequest() engines.EngineSandboxRequest {
	return engines.EngineSandboxRequest{
		EntryPoint:               []string{"/usr/local/bin/test-agent"},
		ModelCredential:          engines.ModelCredentialDestination{APIKeyEnv: "TEST_API_KEY", BaseURLEnv: "TEST_BASE_URL"},
		WorkingDirectoryVariable: "TEST_CWD",
	}
}
func (a *testAdapter) StartupMaterialRequest() engines.EngineStartupMaterialRequest {
	return engines.EngineStartupMaterialRequest{}
}
func (a *testAdapter) ActivateRuntime(context.Context, engines.EngineStartupContext, engines.Box) (engines.SessionRuntime, error) {
	return engines.SessionRuntime{}, nil
}

func testCaps(kind string, sessionKinds ...engines.SessionKind) engines.EngineRuntimeCapabilities {
	defaults := map[engines.SessionKind]string{}
	for _, k := range sessionKinds {
		defaults[k] = "default"
	}
	return engines.EngineRuntimeCapabilities{
		EngineKind:            kind,
		SupportedSessionKinds: sessionKinds,
		Workload: engines.EngineWorkloadDeclaration{
			ConfigDirName: ".test", ConfigDirEnv: "TEST_HOME", RequiredCommands: []string{"test-agent"},
		},
		ConversationPlacement:  engines.PlacementPerConversationAccount,
		DefaultRuntimeImage:    "test:1",
		PermissionModes:        []string{"default", "acceptEdits", "plan"},
		PermissionModeDefaults: defaults,
		Extensions: engines.EngineExtensions{
			MCPTransports:      []engines.MCPTransport{engines.MCPTransportStdio, engines.MCPTransportSSE},
			Skills:             &engines.SkillsDiscovery{Directories: []string{"skills"}},
			NativePackageKinds: []string{"plugin"},
		},
	}
}

// testClient serves the runtime contract for registration, and stands for the live
// runtime the recording signaler hands permission modes to. It refuses the modes in
// refuse, answering with the message given, as a program does.
type testClient struct {
	refuse map[string]string
}

func (*testClient) EngineKind() string                                 { return testEngine }
func (*testClient) IsLive() bool                                       { return false }
func (*testClient) EngineSessionKey() string                           { return "" }
func (*testClient) Submit(context.Context, engines.RuntimeInput) error { return nil }
func (*testClient) Events(context.Context, *engines.RuntimeCursor) iter.Seq2[engines.Event, error] {
	return func(func(engines.Event, error) bool) {}
}
func (*testClient) State(context.Context) (engines.RuntimeState, error) {
	return engines.RuntimeState{}, nil
}
func (*testClient) Answer(context.Context, string, engines.InteractionAnswer) error { return nil }
func (*testClient) Interrupt(context.Context, bool) error                           { return nil }
func (*testClient) Committed(context.Context, engines.RuntimeCursor) error          { return nil }
func (*testClient) Capabilities(context.Context) (engines.EngineCapabilityManifest, error) {
	return engines.EngineCapabilityManifest{}, nil
}
func (*testClient) Close() error { return nil }
func (c *testClient) SetPermissionMode(_ context.Context, mode string) error {
	if msg, ok := c.refuse[mode]; ok {
		return &engines.RuntimeControlRefused{Control: engines.ControlSetPermissionMode, Message: msg}
	}
	return nil
}
func (*testClient) StopChildRun(context.Context, string) error { return nil }

var (
	_ engines.EngineAdapter        = (*testAdapter)(nil)
	_ engines.RuntimeClient        = (*testClient)(nil)
	_ engines.PermissionModeSetter = (*testClient)(nil)
	_ engines.ChildRunStopper      = (*testClient)(nil)
)

// sentSignal is one signal the recording signaler received.
type sentSignal struct {
	SessionID string
	Name      string
	Payload   any
}

// recordingSignaler records starts and signals instead of reaching Temporal. It
// answers permission-mode updates as the workflow does with a live runtime: the mode
// goes to runtime first, and is stored only when runtime accepted it.
type recordingSignaler struct {
	mu      sync.Mutex
	starts  []string
	signals []sentSignal
	store   *store.Store
	runtime *testClient
	// modeErr, when set, is every permission-mode update's failure.
	modeErr error
}

var _ SessionSignaler = (*recordingSignaler)(nil)

func (r *recordingSignaler) StartSession(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, id)
	return nil
}

func (r *recordingSignaler) SignalSession(_ context.Context, id, name string, payload any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals = append(r.signals, sentSignal{id, name, payload})
	return nil
}

func (r *recordingSignaler) SetPermissionMode(ctx context.Context, id, mode string) (workflows.PermissionModeSet, error) {
	r.mu.Lock()
	r.signals = append(r.signals, sentSignal{id, workflows.UpdateSetPermissionMode, workflows.SetPermissionMode{PermissionMode: mode}})
	fail := r.modeErr
	r.mu.Unlock()
	if fail != nil {
		return workflows.PermissionModeSet{}, fail
	}
	var refused *engines.RuntimeControlRefused
	if err := r.runtime.SetPermissionMode(ctx, mode); errors.As(err, &refused) {
		return workflows.PermissionModeSet{}, temporal.NewNonRetryableApplicationError(refused.Message, workflows.ErrPermissionModeRefused, nil)
	}
	if _, err := r.store.SetSessionPermissionMode(ctx, id, mode); err != nil {
		return workflows.PermissionModeSet{}, err
	}
	return workflows.PermissionModeSet{Applied: true}, nil
}

func (r *recordingSignaler) named(name string) []sentSignal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sentSignal
	for _, s := range r.signals {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// fixture is a server on a fresh database with an admin, a member, an offered
// RuntimeProfile and an Agent.
type fixture struct {
	t        testing.TB
	ctx      context.Context
	st       *store.Store
	db       *pgx.Conn
	srv      *httptest.Server
	opts     Options
	signals  *recordingSignaler
	runtime  *testClient
	registry *engines.Registry
	admin    string // tokens
	member   string
	other    string
	adminID  string
	memberID string
	profile  store.RuntimeProfile
	agent    store.Agent
}

func newFixture(t testing.TB, tune ...func(*Options)) *fixture {
	t.Helper()
	return newFixtureOn(t, func(_ string, o *Options) {
		for _, fn := range tune {
			fn(o)
		}
	})
}

// newFixtureOn is newFixture whose tuning also gets the database's DSN, to serve
// the API from another connection to it.
func newFixtureOn(t testing.TB, tune func(dsn string, o *Options)) *fixture {
	t.Helper()
	ctx := testutil.Context(t)
	_, dsn := testutil.NewDB(t)
	// The server's store seals secret values, as a configured deployment does.
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	st, err := store.Open(ctx, dsn, testutil.Logger(t), store.Options{SecretsKey: key})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	reg := engines.NewRegistry()
	require.NoError(t, reg.Register(testEngine, &testAdapter{caps: testCaps(testEngine, engines.SessionKindAgentChat)}))
	require.NoError(t, reg.Register("assistantonly", &testAdapter{caps: testCaps("assistantonly", engines.SessionKindAssistantChat)}))
	listener, err := pubsub.Start(ctx, dsn, testutil.Logger(t), pubsub.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close() })
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	f := &fixture{t: t, ctx: ctx, st: st, db: db, registry: reg, runtime: &testClient{refuse: map[string]string{}}}
	f.signals = &recordingSignaler{store: st, runtime: f.runtime}
	// Tokens are cached as a deployment's default caches them, so every test of a
	// revocation or a disabled user goes through the cache.
	opts := Options{Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Store: st, Output: listener, Signaler: f.signals, Registry: reg,
		TokenCacheTTL: 5 * time.Second}
	tune(dsn, &opts)
	f.opts = opts
	f.srv = httptest.NewServer(New(opts).Handler())
	t.Cleanup(f.srv.Close)

	f.adminID, f.admin = f.newUser("admin@example.test", store.RoleAdmin)
	f.memberID, f.member = f.newUser("member@example.test", store.RoleMember)
	_, f.other = f.newUser("other@example.test", store.RoleMember)
	f.profile, err = st.CreateRuntimeProfile(ctx, store.NewRuntimeProfile{Name: "test-profile", EngineKind: testEngine, Enabled: true, SandboxBackend: store.SandboxLocal})
	require.NoError(t, err)
	mode := "default"
	f.agent, err = st.CreateAgent(ctx, store.NewAgent{Name: "code-reviewer", EngineKind: testEngine, RuntimeProfileID: f.profile.ID, PermissionMode: &mode, CreatedBy: &f.adminID})
	require.NoError(t, err)
	return f
}

// serve runs another server on the fixture's database through Serve, with its HTTP
// timeouts, and returns its address; tune adjusts its options.
func (f *fixture) serve(tune func(*Options)) string {
	f.t.Helper()
	opts := f.opts
	tune(&opts)
	ln, err := Listen("127.0.0.1:0")
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- New(opts).Serve(ctx, ln, time.Second) }()
	f.t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

func (f *fixture) newUser(email, role string) (string, string) {
	u, err := f.st.CreateUser(f.ctx, store.NewUser{Email: email, Role: role})
	require.NoError(f.t, err)
	_, token, err := f.st.CreateAPIToken(f.ctx, u.ID, "test", nil)
	require.NoError(f.t, err)
	return u.ID, token
}

// exec runs SQL standing in for what orchestration records (responses, statuses...).
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	_, err := f.db.Exec(f.ctx, sql, args...)
	require.NoError(f.t, err, sql)
}

// reply is a decoded envelope with its status and raw data.
type reply struct {
	Status  int
	Code    string
	Message string
	Data    json.RawMessage
	Header  http.Header
}

func (r reply) into(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Data, v), string(r.Data))
}

// call sends a request with token (none when empty) and body (raw string, or any value
// encoded as JSON, or nil).
func (f *fixture) call(method, path, token string, body any, header ...string) reply {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(f.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(f.ctx, method, f.srv.URL+path, rd)
	require.NoError(f.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	var env struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	require.NoError(f.t, json.Unmarshal(raw, &env), "%s %s: %s", method, path, raw)
	return reply{Status: resp.StatusCode, Code: env.Code, Message: env.Message, Data: env.Data, Header: resp.Header}
}

// ok asserts a 200 OK envelope.
func (r reply) ok(t testing.TB) reply {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s %s", r.Code, r.Message)
	require.Equal(t, CodeOK, r.Code)
	return r
}

// refused asserts an error envelope.
func (r reply) refused(t testing.TB, status int, code string, msgContains ...string) reply {
	t.Helper()
	require.Equal(t, status, r.Status, "%s %s", r.Code, r.Message)
	require.Equal(t, code, r.Code, r.Message)
	for _, s := range msgContains {
		require.Contains(t, r.Message, s)
	}
	return r
}

// newSession creates a Session of the fixture's Agent for token.
func (f *fixture) newSession(token string) string {
	f.t.Helper()
	var created createdSession
	f.call("POST", "/api/v1/agents/"+f.agent.ID+"/conversations", token, "{}").ok(f.t).into(f.t, &created)
	return created.SessionID
}

// activate marks the Session's runtime ready, as orchestration will.
func (f *fixture) activate(sessionID string) {
	f.exec("UPDATE sessions SET lifecycle = 'active', runtime_status = 'idle' WHERE id = $1", sessionID)
}

func (f *fixture) session(sessionID, token string) sessionDetails {
	f.t.Helper()
	var d sessionDetails
	f.call("GET", "/api/v1/sessions/"+sessionID, token, nil).ok(f.t).into(f.t, &d)
	return d
}
