package activities_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/internal/scriptengine"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/internal/testutil/boxroot"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/sandbox/local/localtest"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
	"github.com/astrabox/astrabox/worker"
	"github.com/astrabox/astrabox/workflows"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// agentMount is where the scriptagent binary is bound inside every box.
const agentMount = "/opt/scriptagent"

// stack is the whole orchestration for one test: PostgreSQL, the Temporal dev server,
// a local box backend, the scripted engine, and workers started on demand.
type stack struct {
	t   testing.TB
	ctx context.Context
	st  *store.Store
	// dsn reaches the stack's database, for a test that changes what no store method
	// does.
	dsn     string
	tc      client.Client
	backend *local.Backend
	// workerBackend, when set, is what workers started from now on use as the local
	// backend (a wrapper of backend that injects faults).
	workerBackend sandbox.Backend
	// remote, when set, is the backend the stack's RuntimeProfile selects
	// instead of the local one (store.SandboxOpenSandbox).
	remote  sandbox.Backend
	engines *engines.Registry
	notices *pubsub.Listener
	mounts  []sandbox.Mount
	// modelEgress points boxes at the model service through the "model" forward.
	modelEgress bool
	// secrets are the configured platform secrets by name.
	secrets map[string]string
	// logs, when set, also receives every worker log line at debug level.
	logs     io.Writer
	stateDir string
	// titles, when set, writes automatic titles in the workers started after.
	titles activities.Titler
	// credentialOwner, when set, declares the model credential delivery owner.
	credentialOwner activities.CredentialOwnerFunc
	taskQueue       string
	// tel, when set, gives the workers started after its metrics and worker
	// interceptors (the tracing interceptor comes with s.tc's client).
	tel     *telemetry.Telemetry
	user    store.User
	profile store.RuntimeProfile
	agent   store.Agent
}

// buildAgent builds scriptagent into a folder of its own (boxes bind the whole
// folder) inside the process's box folder, which TestMain removes.
var buildAgent = sync.OnceValues(func() (string, error) {
	root, err := reporoot.Find()
	if err != nil {
		return "", err
	}
	bin, err := boxroot.BinDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(bin, "scriptagent")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("make the scriptagent folder: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "scriptagent"), "./internal/scriptengine/scriptagent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return dir, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "build scriptagent: " + e.err.Error() + ": " + e.out }

// engineSetup chooses the Agent program a stack runs; the default is scriptagent.
type engineSetup struct {
	kind    string
	adapter engines.EngineAdapter
	// mounts are bound into every box; egress serves box forwards by name.
	mounts []sandbox.Mount
	egress map[string]egress.Route
	// secrets are the platform secrets the workers' configuration holds.
	secrets map[string]string
	// logs, when set, also receives every worker log line at debug level.
	logs io.Writer
	// secretsKey, when set, opens the store with it so Agents can hold sealed secrets.
	secretsKey []byte
	// prewarm, when positive, keeps that many boxes of the stack's profile ready
	// before any Session asks, as a configured prewarm_size does.
	prewarm int
	// tracing is the stack's RuntimeProfile's tracing configuration.
	tracing json.RawMessage
	// remote, when set, makes the backend the stack's RuntimeProfile selects
	// (as sandbox_backend opensandbox, with image), given the stack and its
	// local backend.
	remote func(s *stack) sandbox.Backend
	image  string
}

func newStack(t testing.TB) *stack {
	t.Helper()
	binDir, err := buildAgent()
	require.NoError(t, err)
	return newStackWith(t, engineSetup{
		kind:    scriptengine.Kind,
		adapter: &scriptengine.Adapter{BinaryPath: agentMount + "/scriptagent"},
		mounts:  []sandbox.Mount{{Source: binDir, Target: agentMount}},
	})
}

func newStackWith(t testing.TB, setup engineSetup) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("orchestration integration tests need PostgreSQL, Temporal and boxes")
	}
	opts := localtest.Options(t)
	opts.Egress = setup.egress
	var err error
	s := &stack{t: t, ctx: testutil.ContextWithTimeout(t, 10*time.Minute), mounts: setup.mounts, secrets: setup.secrets, logs: setup.logs, stateDir: opts.StateDir, taskQueue: "orch-" + uniq()}
	_, s.modelEgress = setup.egress[activities.ModelForwardName]
	var dsn string
	s.st, dsn = testutil.NewDB(t)
	s.dsn = dsn
	s.notices, err = pubsub.Start(s.ctx, dsn, testutil.Logger(t).Named("pubsub"), pubsub.Options{Buffer: activities.InputNoticeQueue})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.notices.Close() })
	if setup.secretsKey != nil {
		s.st, err = store.Open(s.ctx, dsn, testutil.Logger(t), store.Options{SecretsKey: setup.secretsKey})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.st.Close() })
	}
	s.tc = testutil.TemporalDevServer(t).Client()
	s.engines = engines.NewRegistry()
	require.NoError(t, s.engines.Register(setup.kind, setup.adapter))
	s.user, err = s.st.CreateUser(s.ctx, store.NewUser{Email: uniq() + "@example.com"})
	require.NoError(t, err)
	backendName := store.SandboxLocal
	if setup.remote != nil {
		backendName = store.SandboxOpenSandbox
	}
	profile, err := s.st.CreateRuntimeProfile(s.ctx, store.NewRuntimeProfile{Name: "p-" + uniq(), EngineKind: setup.kind, Enabled: true,
		SandboxBackend: backendName, Image: setup.image, PrewarmSize: setup.prewarm, Tracing: setup.tracing})
	require.NoError(t, err)
	s.profile = profile
	if setup.prewarm > 0 {
		// The pool's boxes are made as the worker's SpecFor makes them, for no Agent
		// in particular: what an Agent configures is applied when a Session claims one.
		spec, err := s.specFor(profile, store.Agent{EngineKind: setup.kind}, setup.adapter)
		require.NoError(t, err)
		opts.Prewarm = []local.PrewarmProfile{{Key: profile.ID, Spec: spec, Size: setup.prewarm}}
		opts.Logger = testutil.Logger(t).Named("prewarm")
	}
	s.backend = localtest.NewBackend(t, opts)
	if setup.remote != nil {
		s.remote = setup.remote(s)
	}
	s.agent, err = s.st.CreateAgent(s.ctx, store.NewAgent{Name: "a-" + uniq(), EngineKind: setup.kind, RuntimeProfileID: profile.ID})
	require.NoError(t, err)
	return s
}

// specFor is the box spec the stack's workers make boxes from.
func (s *stack) specFor(p store.RuntimeProfile, a store.Agent, ad engines.EngineAdapter) (sandbox.Spec, error) {
	spec, err := activities.DefaultSpec(p, a, ad)
	spec.Mounts = append(spec.Mounts, s.mounts...)
	if s.modelEgress {
		activities.AddModelEgress(&spec, ad.SandboxRequest())
	}
	return spec, err
}

// startWorker runs a worker process's pair of workers (shared and host queue) with
// its own activities and live connections; stop ends it as a process exit would.
func (s *stack) startWorker(hostID string) (stop func()) {
	return s.startWorkerWith(hostID, activities.Settings{HeartbeatEvery: time.Second})
}

// startWorkerWith is startWorker with the activities' settings.
func (s *stack) startWorkerWith(hostID string, set activities.Settings) (stop func()) {
	s.t.Helper()
	logger := testutil.Logger(s.t).Named(hostID)
	if s.logs != nil {
		debug := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(zapcore.AddSync(s.logs)), zap.DebugLevel)
		logger = zap.New(zapcore.NewTee(logger.Core(), debug)).Named(hostID)
	}
	backends := map[string]sandbox.Backend{store.SandboxLocal: s.backend}
	if s.workerBackend != nil {
		backends[store.SandboxLocal] = s.workerBackend
	}
	if s.remote != nil {
		backends[store.SandboxOpenSandbox] = s.remote
	}
	acts, err := activities.New(activities.Deps{
		Store:         s.st,
		Engines:       s.engines,
		Backends:      backends,
		OpenBox:       func(_ context.Context, h sandbox.Handle) (engines.Box, error) { return enginebox.New(h), nil },
		Notices:       s.notices,
		SpecFor:       s.specFor,
		HostTaskQueue: worker.HostTaskQueue(s.taskQueue, hostID),
		PlatformSecrets: func(name string) (string, bool) {
			v, ok := s.secrets[name]
			return v, ok
		},
		Titles:          s.titles,
		CredentialOwner: s.credentialOwner,
		Logger:          logger,
		Settings:        set,
		Metrics:         metricsOf(s.tel),
	})
	require.NoError(s.t, err)
	w, err := worker.New(s.tc, worker.Options{
		SharedTaskQueue: s.taskQueue,
		HostID:          hostID,
		Shared:          []worker.Registrar{workflows.Register, acts.RegisterShared},
		Host:            []worker.Registrar{acts.RegisterHost},
		Logger:          logger,
		Interceptors:    interceptorsOf(s.tel),
	})
	require.NoError(s.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(s.t, <-done)
		})
	}
	s.t.Cleanup(stop)
	return stop
}

func (s *stack) newSession() string {
	s.t.Helper()
	sess, _, err := s.st.CreateSessionIdempotent(s.ctx, store.NewSession{UserID: s.user.ID, AgentID: s.agent.ID})
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		// The workflow outlives the test otherwise; its boxes go with the backend.
		_ = s.tc.TerminateWorkflow(context.Background(), workflows.SessionWorkflowID(sess.ID), "", "test ended")
	})
	return sess.ID
}

// send does what the API does: write the input first, then SignalWithStart.
// send accepts an input as the API does: the workflow is signalled unless a live
// Relay takes the Session's inputs on notice.
func (s *stack) send(sessionID, text string) string {
	s.t.Helper()
	accepted, err := s.st.AcceptInput(s.ctx, store.NewInput{SessionID: sessionID, Content: text})
	require.NoError(s.t, err)
	if !accepted.RelayListens {
		s.signal(sessionID, workflows.SignalInputAccepted, workflows.InputAccepted{InputID: accepted.Input.ID})
	}
	return accepted.Input.ID
}

func (s *stack) signal(sessionID, name string, payload any) {
	s.t.Helper()
	_, err := s.tc.SignalWithStartWorkflow(s.ctx, workflows.SessionWorkflowID(sessionID), name, payload,
		client.StartWorkflowOptions{ID: workflows.SessionWorkflowID(sessionID), TaskQueue: s.taskQueue},
		workflows.SessionWorkflowName, workflows.SessionStart{SessionID: sessionID})
	require.NoError(s.t, err)
}

// eventually polls cond until it holds. The facts it waits on are written by another
// process (the worker) with no event the test could subscribe to more simply.
func (s *stack) eventually(what string, cond func() bool) {
	s.t.Helper()
	s.eventuallyWithin(s.ctx, what, cond)
}

// eventuallyWithin is eventually bounded by ctx, for a fact that must hold well before
// the stack's own deadline.
func (s *stack) eventuallyWithin(ctx context.Context, what string, cond func() bool) {
	s.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			s.t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func (s *stack) response(sessionID, responseID string) (store.Response, bool) {
	r, err := s.st.GetResponseByID(s.ctx, sessionID, responseID)
	if err != nil {
		require.ErrorIs(s.t, err, store.ErrNotFound)
		return r, false
	}
	return r, true
}

func (s *stack) waitEnded(sessionID, responseID string) store.Response {
	s.t.Helper()
	var r store.Response
	s.eventually("response "+responseID+" to end", func() bool {
		var ok bool
		r, ok = s.response(sessionID, responseID)
		return ok && r.Outcome != nil
	})
	return r
}

// parts returns the Session's whole output log.
func (s *stack) parts(sessionID string) []store.OutputPart {
	out, err := s.st.ListOutputPartsAfter(s.ctx, sessionID, 0, 100000)
	require.NoError(s.t, err)
	return out
}

// deltas returns the text deltas of a response in log order.
func (s *stack) deltas(sessionID, responseID string) []string {
	var out []string
	for _, p := range s.parts(sessionID) {
		if p.ResponseID == nil || *p.ResponseID != responseID {
			continue
		}
		var f struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		require.NoError(s.t, json.Unmarshal(p.Frame, &f))
		if f.Type == "text-delta" {
			out = append(out, f.Delta)
		}
	}
	return out
}

// requireGaplessLog checks that the Session's seqs run 1..n and that every part is
// a valid ai@7 UI message chunk.
func (s *stack) requireGaplessLog(sessionID string) {
	s.t.Helper()
	for i, p := range s.parts(sessionID) {
		require.Equal(s.t, int64(i+1), p.Seq)
		f, err := engines.ParseFrame(p.Frame)
		require.NoError(s.t, err)
		require.NoError(s.t, engines.ValidateFrame(f), "part %d: %s", p.Seq, p.Frame)
	}
}

func (s *stack) session(id string) store.Session {
	sess, err := s.st.GetSessionByID(s.ctx, id)
	require.NoError(s.t, err)
	return sess
}

func uniq() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
