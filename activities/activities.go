// Package activities holds what SessionWorkflow does outside the workflow: preparing
// and releasing boxes (shared task queue), and everything that needs the live runtime
// connection (host task queue of the worker process holding it): activating the
// runtime, relaying its events into PostgreSQL, and handing it inputs, answers,
// interrupts and permission modes. Durable facts live in PostgreSQL; activities
// re-read them on every call, so a repeated call is harmless.
package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
)

// BoxOpener turns a sandbox handle into the engines.Box an adapter works with.
type BoxOpener func(ctx context.Context, h sandbox.Handle) (engines.Box, error)

// SpecBuilder builds the box spec for an Agent's RuntimeProfile and engine.
type SpecBuilder func(profile store.RuntimeProfile, agent store.Agent, adapter engines.EngineAdapter) (sandbox.Spec, error)

// InputNotices subscribes to PostgreSQL notifications (store/pubsub.Listener). A
// Relay listens on its Session's inputs channel and hands a new input over at once;
// the workflow's Deliver stays the path that never depends on a notice arriving.
type InputNotices interface {
	Subscribe(ctx context.Context, channel string) (*pubsub.Subscription, error)
}

var _ InputNotices = (*pubsub.Listener)(nil)

// InputNoticeQueue is the queue length of each Relay's input-notice subscription
// (pubsub.Options.Buffer of the worker's listener). A notice for a full queue is
// discarded and the loss hands every held input over with one read, so any length
// is correct; eight lets a burst of a person's parallel messages reach the runtime
// from their notices, for 256 bytes an idle Session.
const InputNoticeQueue = 8

// DefaultRelayHeartbeatEvery is how often a Relay heartbeats to Temporal unless
// Settings say otherwise. A heartbeat only tells Temporal the Relay's worker and loop
// are alive (the host watch notices a dead worker sooner), so it can be seldom.
const DefaultRelayHeartbeatEvery = 30 * time.Second

// defaultDiagnosticsKept is enough runtime diagnostics per Session to see what a
// program said around a fault, and few enough that a chatty program cannot grow the
// table without bound.
const defaultDiagnosticsKept = 500

// Settings tunes the activities; zero values take the documented defaults.
type Settings struct {
	// IdleRelease is how long a Session may stay idle before its box is released;
	// 0 means the default of 30 minutes, negative disables idle release.
	IdleRelease time.Duration
	// LeaseTTL is how long a Relay's reader lease lasts without renewal (default 30 s).
	LeaseTTL time.Duration
	// HeartbeatEvery is how often a long setup activity heartbeats, how often a
	// waiting Relay vouches that its loop goes round, and how often the worker renews
	// its Relays' leases (default 5 s).
	HeartbeatEvery time.Duration
	// RelayHeartbeatEvery is how often a Relay heartbeats to Temporal (default
	// DefaultRelayHeartbeatEvery); the workflow's Relay heartbeat timeout must allow a
	// few of them.
	RelayHeartbeatEvery time.Duration
	// MaxBatch bounds the events one Relay transaction records (default 64).
	MaxBatch int
	// DiagnosticsKept bounds the runtime diagnostics stored per Session; the oldest
	// are dropped first (default 500).
	DiagnosticsKept int
	// TitleResponses is how many of a Session's first responses may give it an
	// automatic title (default 3): each completed one is tried once until one does.
	TitleResponses int
}

func (s Settings) withDefaults() Settings {
	if s.IdleRelease == 0 {
		s.IdleRelease = 30 * time.Minute
	}
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = 30 * time.Second
	}
	if s.HeartbeatEvery <= 0 {
		s.HeartbeatEvery = 5 * time.Second
	}
	if s.RelayHeartbeatEvery <= 0 {
		s.RelayHeartbeatEvery = DefaultRelayHeartbeatEvery
	}
	if s.MaxBatch <= 0 {
		s.MaxBatch = 64
	}
	if s.DiagnosticsKept <= 0 {
		s.DiagnosticsKept = defaultDiagnosticsKept
	}
	if s.TitleResponses <= 0 {
		s.TitleResponses = 3
	}
	return s
}

// Deps are what the activities work with.
type Deps struct {
	Store   *store.Store
	Engines *engines.Registry
	// Backends are the sandbox backends by RuntimeProfile sandbox_backend name.
	Backends map[string]sandbox.Backend
	OpenBox  BoxOpener
	// SpecFor builds box specs; nil uses DefaultSpec.
	SpecFor SpecBuilder
	// Notices, when set, wakes Relays on new inputs (optional).
	Notices InputNotices
	// HostTaskQueue is this process's host task queue (worker.HostTaskQueue).
	HostTaskQueue string
	// PlatformSecrets resolves the named platform secrets adapters ask for in their
	// StartupMaterialRequest (nil: none is configured).
	PlatformSecrets PlatformSecrets
	// CredentialOwner, when set, is the deployment's runtime preparation integration
	// declaring the model credential delivery owner of a conversation's current
	// configuration; nil declares none.
	CredentialOwner CredentialOwnerFunc
	// Titles, when set, writes automatic titles (configuration titles.enabled); nil
	// leaves untitled Sessions untitled.
	Titles   Titler
	Logger   *zap.Logger
	Settings Settings
	// Metrics receives the Relays' series (inputs admitted, parts committed, relay
	// lag); nil keeps them in a registry of the activities' own.
	Metrics *telemetry.Metrics
}

// CredentialOwnerFunc names the model credential delivery owner the deployment's
// runtime preparation integration declares for an Agent conversation's current
// configuration (its Agent and RuntimeProfile), or "" when it declares none.
type CredentialOwnerFunc func(ctx context.Context, agent store.Agent, profile store.RuntimeProfile) (string, error)

// PlatformSecrets returns the value of a named platform secret from the platform's
// configuration, and whether one is configured.
type PlatformSecrets func(name string) (value string, ok bool)

// Activities is the set of SessionWorkflow's activities of one worker process. It
// holds the process's live runtime connections.
type Activities struct {
	deps Deps
	set  Settings
	live *liveRegistry
	// leases renews the reader leases of this worker's Relays.
	leases *leaseKeeper
	log    *zap.Logger
	// metrics is Deps.Metrics, or a registry of the activities' own.
	metrics *telemetry.Metrics
}

// New builds the activities of one worker process.
func New(d Deps) (*Activities, error) {
	if d.Store == nil || d.Engines == nil || d.OpenBox == nil {
		return nil, errors.New("activities: store, engines and box opener are required")
	}
	if d.HostTaskQueue == "" {
		return nil, errors.New("activities: host task queue is required")
	}
	if d.SpecFor == nil {
		d.SpecFor = DefaultSpec
	}
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	metrics := d.Metrics
	if metrics == nil {
		metrics = telemetry.NewMetrics(d.Logger)
	}
	set := d.Settings.withDefaults()
	return &Activities{deps: d, set: set, live: newLiveRegistry(), leases: newLeaseKeeper(d.Store, set, d.Logger), log: d.Logger, metrics: metrics}, nil
}

// RegisterShared registers the activities any worker may run (shared task queue).
func (a *Activities) RegisterShared(r worker.Registry) {
	r.RegisterActivity(a.LoadSession)
	r.RegisterActivity(a.PrepareRuntime)
	r.RegisterActivity(a.ReconcileLostRuntime)
	r.RegisterActivity(a.CheckIdle)
	r.RegisterActivity(a.Release)
	r.RegisterActivity(a.EndConversation)
	r.RegisterActivity(a.MarkTerminated)
	r.RegisterActivity(a.RefuseHeldInputs)
	r.RegisterActivity(a.StorePermissionMode)
}

// RegisterHost registers the activities that need this process's live connections
// (host task queue).
func (a *Activities) RegisterHost(r worker.Registry) {
	r.RegisterActivity(a.ActivateRuntime)
	r.RegisterActivity(a.Relay)
	r.RegisterActivity(a.StopRelay)
	r.RegisterActivity(a.Deliver)
	r.RegisterActivity(a.Answer)
	r.RegisterActivity(a.Interrupt)
	r.RegisterActivity(a.SetPermissionMode)
	r.RegisterActivity(a.ApplyPermissionMode)
	r.RegisterActivity(a.StopChildRun)
	r.RegisterActivity(a.Disconnect)
}

// LiveSessions is how many live runtime connections this process holds.
func (a *Activities) LiveSessions() int { return a.live.len() }

func (a *Activities) backendFor(profile store.RuntimeProfile) (sandbox.Backend, error) {
	b, ok := a.deps.Backends[profile.SandboxBackend]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("runtime profile %s selects sandbox backend %q, which this worker does not run", profile.ID, profile.SandboxBackend),
			ErrTypeConfiguration, nil)
	}
	return b, nil
}

// resolve reads the Session's current Agent, RuntimeProfile and adapter. The adapter is
// the profile's (engines.Registry.ProfileAdapter): for a profile that defines its ACP
// program, built from the program as saved now, so a runtime started after a change
// runs the saved program.
func (a *Activities) resolve(ctx context.Context, sessionID string) (store.Session, store.Agent, store.RuntimeProfile, engines.EngineAdapter, error) {
	sess, err := a.deps.Store.GetSessionByID(ctx, sessionID)
	if err != nil {
		return store.Session{}, store.Agent{}, store.RuntimeProfile{}, nil, sessionErr(err)
	}
	agent, err := a.deps.Store.GetAgentByID(ctx, sess.AgentID)
	if err != nil {
		return sess, store.Agent{}, store.RuntimeProfile{}, nil, sessionErr(err)
	}
	profile, err := a.deps.Store.GetRuntimeProfileByID(ctx, agent.RuntimeProfileID)
	if err != nil {
		return sess, agent, store.RuntimeProfile{}, nil, sessionErr(err)
	}
	// The Agent's engine kind is its profile's: the two change together.
	adapter, err := a.deps.Engines.ProfileAdapter(profile.EngineKind, profile.ACPProgram)
	if errors.Is(err, engines.ErrNotInstalled) {
		return sess, agent, profile, nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("engine kind %q is not installed", profile.EngineKind), ErrTypeConfiguration, nil)
	}
	if err != nil {
		return sess, agent, profile, nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("runtime profile %s: %v", profile.ID, err), ErrTypeConfiguration, err)
	}
	return sess, agent, profile, adapter, nil
}

// sessionErr makes a missing Session, Agent or profile a permanent failure.
func sessionErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSessionGone, err)
	}
	return err
}

// logger is the activity's logger with its Session. Its fields are encoded when it
// first writes: a Relay keeps its logger for the life of its runtime and most never
// log, and an encoded copy holds a buffer.
func (a *Activities) logger(ctx context.Context, sessionID string) *zap.Logger {
	l := a.log.WithLazy(zap.String("session_id", sessionID))
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.WithLazy(zap.String("activity", info.ActivityType.Name), zap.Int32("attempt", info.Attempt))
	}
	return l
}

// boxImage is the image a box of a profile runs: the profile's own, or the engine's
// DefaultRuntimeImage when the profile names none. An absolute path is an unpacked
// root directory (what the local backend runs); anything else is an image reference
// for backends that pull images, which the local backend refuses by name.
func boxImage(profileImage, engineDefault string) sandbox.Image {
	image := profileImage
	if image == "" {
		image = engineDefault
	}
	if image == "" || strings.HasPrefix(image, "/") {
		return sandbox.Image{Root: image}
	}
	return sandbox.Image{URI: image}
}

// EntryPointProcess is the process id the engine's entry point runs under in a box.
const EntryPointProcess = "entrypoint"

// DefaultSpec builds a box spec from the RuntimeProfile and the adapter's sandbox
// request: the profile's image (or the engine's default) and resources, the engine's
// environment, its entry point as the box's resident service, the forward to the
// profile's tracing endpoint when tracing is enabled, and the profile key
// prewarm pools are kept under. Resources the profile leaves out
// take the backend's configured defaults.
func DefaultSpec(profile store.RuntimeProfile, agent store.Agent, adapter engines.EngineAdapter) (sandbox.Spec, error) {
	req := adapter.SandboxRequest()
	limits, err := sandbox.ParseResources(profile.Resources)
	if err != nil {
		return sandbox.Spec{}, fmt.Errorf("runtime profile %s: %w", profile.ID, err)
	}
	spec := sandbox.Spec{
		ProfileKey: profile.ID,
		Image:      boxImage(profile.Image, adapter.Capabilities().DefaultRuntimeImage),
		Limits:     limits,
		Env:        map[string]string{},
		Metadata:   map[string]string{"agent_id": agent.ID, "engine_kind": agent.EngineKind},
	}
	for k, v := range req.Environment {
		spec.Env[k] = v
	}
	if len(req.EntryPoint) > 0 {
		// The image's entry point is the box's resident service: running, and
		// listening on its readiness port, before the box reports ready.
		spec.Services = append(spec.Services, sandbox.Service{
			Process:   sandbox.ProcessSpec{ID: EntryPointProcess, Argv: req.EntryPoint},
			ReadyPort: req.ReadinessPort,
		})
	}
	if req.WorkingDirectoryVariable != "" {
		// The program learns its working directory from the platform: the workspace
		// the box mounts (the runtime identity's WorkspaceDir).
		spec.Env[req.WorkingDirectoryVariable] = spec.WithDefaults().Workspace.MountPath
	}
	if err := addTracingEgress(&spec, profile, adapter.Capabilities()); err != nil {
		return sandbox.Spec{}, err
	}
	return spec, nil
}
