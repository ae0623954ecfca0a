package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/astrabox/astrabox/activities"
	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/enginebox"
	"github.com/astrabox/astrabox/sandbox/local"
	"github.com/astrabox/astrabox/sandbox/prewarm"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/pubsub"
	"github.com/astrabox/astrabox/titles"
	"github.com/astrabox/astrabox/web"
	"github.com/astrabox/astrabox/worker"
	"github.com/astrabox/astrabox/worker/hostwatch"
	"github.com/astrabox/astrabox/worker/resignal"
	"github.com/astrabox/astrabox/workflows"
)

// platform is the set of long-lived dependencies a serving process holds.
type platform struct {
	cfg      *config.Config
	log      *zap.Logger
	store    *store.Store
	temporal client.Client
	engines  *installedEngines
	// boxes is the local sandbox backend when the caller owns it (the dev stack
	// stops its boxes at exit); nil makes runWorker open and close its own.
	boxes *local.Backend
	// tel is the process's one metrics registry and tracer provider.
	tel *telemetry.Telemetry
	// workerMetrics makes runWorker serve the registry on metrics.listen; the dev
	// stack, one process with the API, serves it on the API's /metrics only.
	workerMetrics bool
}

// openPlatform connects to PostgreSQL and Temporal with the configured bounded
// retry; a dependency still down after it fails start-up with a clear error.
func openPlatform(ctx context.Context, cfg *config.Config, log *zap.Logger) (*platform, error) {
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	installed, err := newInstalledEngines(cfg.Engines)
	if err != nil {
		st.Close()
		return nil, err
	}
	tel, err := telemetry.New(ctx, cfg.Tracing, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	tel.Metrics.WatchDatabase(st.Pool())
	tc, err := dialTemporal(ctx, cfg, log, tel)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &platform{cfg: cfg, log: log, store: st, temporal: tc, engines: installed, tel: tel, workerMetrics: true}, nil
}

// dialTemporal connects the process's Temporal client with its telemetry: the SDK's
// metrics into the process's registry and, with tracing, the tracing interceptor.
func dialTemporal(ctx context.Context, cfg *config.Config, log *zap.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	handler, err := tel.TemporalMetricsHandler()
	if err != nil {
		return nil, err
	}
	interceptors, err := tel.TemporalInterceptors()
	if err != nil {
		return nil, err
	}
	return temporalconn.Dial(ctx, cfg.Temporal, log, cfg.Startup.Timeout, temporalconn.Instruments{MetricsHandler: handler, Interceptors: interceptors})
}

func openStore(ctx context.Context, cfg *config.Config, log *zap.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.Database.DSN(), log.Named("store"), store.Options{
		ConnectTimeout: cfg.Startup.Timeout,
		MaxOpenConns:   cfg.Database.MaxOpenConns,
		SecretsKey:     cfg.Secrets.KeyBytes(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return st, nil
}

func (p *platform) close() {
	p.temporal.Close()
	// Spans not exported by now are given a few seconds: an unreachable collector must
	// not hold the process's exit.
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
	defer cancel()
	if err := p.tel.Shutdown(ctx); err != nil {
		p.log.Warn("telemetry", zap.Error(err))
	}
	if err := p.store.Close(); err != nil {
		p.log.Warn("close store", zap.Error(err))
	}
}

// telemetryFlushTimeout bounds the export of the last spans at exit.
const telemetryFlushTimeout = 5 * time.Second

// checks are what /readyz reports on.
func (p *platform) checks() []api.Check {
	return []api.Check{
		{Name: "database", Probe: p.store.Ping},
		{Name: "temporal", Probe: func(ctx context.Context) error {
			_, err := p.temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
	}
}

// runAPI serves the API on http.addr until ctx is done.
func (p *platform) runAPI(ctx context.Context) error {
	ln, err := api.Listen(p.cfg.HTTP.Addr)
	if err != nil {
		return err
	}
	return p.serveAPI(ctx, ln)
}

// serveAPI serves the API on ln, already bound, until ctx is done. ln is closed
// when it returns, also when it fails before serving.
func (p *platform) serveAPI(ctx context.Context, ln net.Listener) error {
	defer func() { _ = ln.Close() }() // a second close, after the server's, is harmless
	listener, err := pubsub.Start(ctx, p.cfg.Database.DSN(), p.log.Named("api"), pubsub.Options{})
	if err != nil {
		return fmt.Errorf("listen for session output: %w", err)
	}
	defer listener.Close()
	// The API reaches local boxes only where it runs beside the local backend
	// (the dev stack); Kubernetes boxes, which the cluster keeps, and
	// OpenSandbox boxes, through the server, from any process. With none, the
	// workspace routes answer 503.
	var reach sessionBoxes
	switch {
	case p.boxes != nil:
		reach = append(reach, p.boxes)
	case p.cfg.Sandbox.Backend == store.SandboxKubernetes:
		kb, err := openKubernetesBackend(p.cfg, p.log)
		if err != nil {
			return err
		}
		defer kb.Close()
		reach = append(reach, kb)
	}
	osb, err := openOpenSandbox(p.cfg.Sandbox.OpenSandbox, p.log.Named("opensandbox"), false, nil)
	if err != nil {
		return err
	}
	if osb != nil {
		defer osb.Close()
		reach = append(reach, osb)
	}
	var boxes api.SessionBoxes
	if len(reach) > 0 {
		boxes = reach
	}
	p.tel.Metrics.WatchCustody(func(ctx context.Context) (int64, time.Duration, error) {
		c, err := p.store.GetCustody(ctx)
		return c.Held, c.OldestAge, err
	})
	srv := api.New(api.Options{
		Telemetry:           p.tel,
		Console:             web.Console(),
		Boxes:               boxes,
		MaxUploadBytes:      p.cfg.HTTP.MaxUploadBytes,
		Logger:              p.log.Named("api"),
		Checks:              p.checks(),
		ErrorMappers:        []api.ErrorMapper{storeErrors},
		Store:               p.store,
		Output:              listener,
		Signaler:            &api.TemporalSignaler{Client: p.temporal, TaskQueue: p.cfg.Temporal.TaskQueue, Describe: p.store.OperatorSummary},
		Registry:            p.engines.registry,
		MaxInputBytes:       p.cfg.HTTP.MaxInputBytes,
		MaxHeldInputs:       p.cfg.HTTP.MaxHeldInputs,
		MaxBodyBytes:        p.cfg.HTTP.MaxBodyBytes,
		ReadTimeout:         p.cfg.HTTP.ReadTimeout,
		IdleTimeout:         p.cfg.HTTP.IdleTimeout,
		MaxStreamsPerToken:  p.cfg.HTTP.MaxStreamsPerToken,
		TokenRecheck:        p.cfg.HTTP.TokenRecheckInterval,
		TokenCacheTTL:       p.cfg.HTTP.TokenCacheTTL,
		MaxLiveBoxesPerUser: p.cfg.Sandbox.MaxLiveBoxesPerUser,
		SandboxBackends:     sandboxOffers(p.cfg),
	})
	p.log.Info("api listening", zap.String("url", p.cfg.HTTP.APIURL()))
	return srv.Serve(ctx, ln, p.cfg.HTTP.ShutdownTimeout)
}

// runWorker runs the Temporal workers, with SessionWorkflow and its activities, the
// sweep that signals Sessions whose pending inputs lost their signal, and the watch
// that marks this worker alive and fails the Relays of dead ones, until ctx is done.
func (p *platform) runWorker(ctx context.Context) error {
	hostID := worker.NewHostID()
	hostTaskQueue := worker.HostTaskQueue(p.cfg.Temporal.TaskQueue, hostID)
	backends := map[string]sandbox.Backend{}
	var backend interface {
		sandbox.Backend
		sandbox.Prewarmer
	}
	switch {
	case p.cfg.Sandbox.Backend == store.SandboxKubernetes:
		kb, err := openKubernetesBackend(p.cfg, p.log)
		if err != nil {
			return err
		}
		defer kb.Close()
		backend = kb
	case p.boxes != nil:
		backend = p.boxes
	default:
		opened, err := p.openLocalBackend(ctx)
		if err != nil {
			return err
		}
		if opened != nil {
			defer opened.Close()
			backend = opened
		}
	}
	if backend != nil {
		backends[p.cfg.Sandbox.Backend] = backend
	}
	egressRoutes, err := modelEgress(p.cfg.Models)
	if err != nil {
		return err
	}
	osb, err := openOpenSandbox(p.cfg.Sandbox.OpenSandbox, p.log.Named("opensandbox"), true, egressRoutes)
	if err != nil {
		return err
	}
	if osb != nil {
		defer osb.Close()
		backends[store.SandboxOpenSandbox] = osb
		reapOpenSandboxOrphans(ctx, p.store, osb, 2*p.cfg.Sandbox.OpenSandbox.ReadyTimeout, p.log.Named("opensandbox"))
	}
	var notices activities.InputNotices
	// Each live Session's Relay subscribes for its input notices.
	workerNotices := pubsub.Options{ApplicationName: "astrabox-worker", Buffer: activities.InputNoticeQueue}
	if l, err := pubsub.Start(ctx, p.cfg.Database.DSN(), p.log.Named("pubsub"), workerNotices); err != nil {
		// Relays then hand inputs over only through the workflow's Deliver.
		p.log.Warn("input notices unavailable", zap.Error(err))
	} else {
		defer l.Close()
		notices = l
	}
	titler, err := p.titler()
	if err != nil {
		return err
	}
	acts, err := activities.New(activities.Deps{
		Titles:        titler,
		Store:         p.store,
		Engines:       p.engines.registry,
		SpecFor:       p.engines.spec,
		Backends:      backends,
		OpenBox:       func(_ context.Context, h sandbox.Handle) (engines.Box, error) { return enginebox.New(h), nil },
		Notices:       notices,
		HostTaskQueue: hostTaskQueue,
		PlatformSecrets: func(name string) (string, bool) {
			v, ok := p.cfg.Secrets.Platform[strings.ToLower(name)]
			return v.Reveal(), ok && v.IsSet()
		},
		Settings: activities.Settings{IdleRelease: idleRelease(p.cfg.Sandbox.IdleRelease)},
		Logger:   p.log.Named("activities"),
		Metrics:  p.tel.Metrics,
	})
	if err != nil {
		return err
	}
	// The host watch fails a dead worker's activities from their records.
	recorder, err := hostwatch.NewRecorder(p.store, hostTaskQueue, p.log.Named("hostwatch"))
	if err != nil {
		return err
	}
	w, err := worker.New(p.temporal, worker.Options{
		SharedTaskQueue:   p.cfg.Temporal.TaskQueue,
		HostID:            hostID,
		Shared:            []worker.Registrar{workflows.Register, acts.RegisterShared},
		Host:              []worker.Registrar{acts.RegisterHost},
		WorkflowCacheSize: p.cfg.Temporal.WorkflowCacheSize,
		Logger:            p.log.Named("worker"),
		Interceptors:      append(p.tel.WorkerInterceptors(), recorder),
		Version:           workerVersion(p.cfg.Temporal.Versioning),
	})
	if err != nil {
		return err
	}
	sweeper, err := resignal.New(resignal.Options{
		Store:    p.store,
		Signaler: &api.TemporalSignaler{Client: p.temporal, TaskQueue: p.cfg.Temporal.TaskQueue, Describe: p.store.OperatorSummary},
		Period:   p.cfg.Temporal.ResignalInterval,
		Grace:    p.cfg.Temporal.ResignalGrace,
		Logger:   p.log.Named("resignal"),
	})
	if err != nil {
		return err
	}
	beat := p.store.NewWorkerBeat(hostTaskQueue)
	defer beat.Close()
	watch, err := hostwatch.New(hostwatch.Options{
		Beat:          beat,
		Store:         p.store,
		Temporal:      hostwatch.Client(p.temporal),
		Namespace:     p.cfg.Temporal.Namespace,
		HostTaskQueue: hostTaskQueue,
		Logger:        p.log.Named("hostwatch"),
		Metrics:       p.tel.Metrics,
	})
	if err != nil {
		return err
	}
	// The watch beats until the Temporal workers have stopped, not only until the
	// process is asked to stop: the others must not take this worker for dead while it
	// finishes the activities it runs.
	workersStopped := make(chan struct{})
	runWorkers := func(ctx context.Context) error {
		defer close(workersStopped)
		return w.Run(ctx)
	}
	runWatch := func(ctx context.Context) error {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		go func() {
			<-workersStopped
			cancel()
		}()
		return watch.Run(wctx)
	}
	parts := []func(context.Context) error{runWorkers, sweeper.Run, runWatch}
	if backend != nil {
		parts = append(parts, func(ctx context.Context) error { return p.syncPrewarmPools(ctx, backend) })
		p.tel.Metrics.WatchBackend(backend, poolDepths(backend))
	}
	if v := workerVersion(p.cfg.Temporal.Versioning); v != nil {
		parts = append(parts, func(ctx context.Context) error { return p.adoptFirstVersion(ctx, v) })
	}
	if p.workerMetrics && p.cfg.Metrics.Listen != "" {
		parts = append(parts, p.serveWorkerMetrics)
	}
	return runAll(ctx, parts...)
}

// poolDepths reads the depth of a backend's own prewarm pools; a backend whose
// warm boxes the cluster keeps (kubernetes' SandboxWarmPool) reports none.
func poolDepths(backend sandbox.Backend) telemetry.PoolDepthFunc {
	if pooled, ok := backend.(interface{ Pool() *prewarm.Pool }); ok {
		return pooled.Pool().Depths
	}
	return nil
}

// prewarmSyncEvery is how often the worker looks for RuntimeProfiles saved since it
// started that ask for prewarmed boxes.
const prewarmSyncEvery = time.Minute

// syncPrewarmPools starts the pool of every RuntimeProfile that asks for prewarmed
// boxes and has none yet (one saved after the worker started), until ctx ends. A
// Session of such a profile starts its pool at once too (activities.ensurePrewarm);
// this covers profiles no Session used yet.
func (p *platform) syncPrewarmPools(ctx context.Context, pw sandbox.Prewarmer) error {
	tick := time.NewTicker(prewarmSyncEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pools, err := p.prewarmPools(ctx)
		if err != nil {
			p.log.Warn("prewarm pools", zap.Error(err))
			continue
		}
		for _, pool := range pools {
			added, err := pw.EnsurePrewarm(pool.Key, pool.Spec, pool.Size)
			if err != nil {
				p.log.Warn("not prewarming", zap.String("runtime_profile", pool.Key), zap.Error(err))
			} else if added {
				p.log.Info("prewarm pool started", zap.String("runtime_profile", pool.Key), zap.Int("size", pool.Size))
			}
		}
	}
}

// openLocalBackend starts the local sandbox backend, which adopts the boxes an
// earlier process left running. It returns nil and no error when this machine
// cannot run boxes: the workflows still run, and Sessions whose RuntimeProfile
// needs the local backend then end TERMINATED, named in the log.
func (p *platform) openLocalBackend(ctx context.Context) (*local.Backend, error) {
	lc := p.cfg.Sandbox.Local
	stateDir, err := filepath.Abs(lc.StateDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox.local.state_dir: %w", err)
	}
	egressRoutes, err := modelEgress(p.cfg.Models)
	if err != nil {
		return nil, err
	}
	pools, err := p.prewarmPools(ctx)
	if err != nil {
		return nil, err
	}
	limits, err := p.cfg.Sandbox.Limits.Sandbox()
	if err != nil {
		return nil, err
	}
	backend, err := local.New(ctx, local.Options{StateDir: stateDir, UIDFirst: lc.UIDBase, UIDCount: lc.UIDCount, RunnerPath: lc.RunnerPath, DefaultLimits: limits, Egress: egressRoutes, Prewarm: pools, Logger: p.log.Named("sandbox")})
	if err != nil {
		p.log.Warn("local sandbox backend unavailable", zap.Error(err))
		return nil, nil
	}
	return backend, nil
}

// runAll runs the given parts until ctx is done or one fails; the first failure
// stops the others.
func runAll(ctx context.Context, parts ...func(context.Context) error) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, part := range parts {
		g.Go(func() error { return part(ctx) })
	}
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// storeErrors maps the store's sentinel errors onto the envelope.
func storeErrors(err error) (*api.Error, bool) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.NotFound("resource"), true
	case errors.Is(err, store.ErrVersionConflict):
		return &api.Error{Status: 409, Code: api.CodeConflict, Message: "the resource was changed by someone else; reload it and retry with its current version"}, true
	}
	return nil, false
}

// prewarmPools builds a pool of ready boxes for every enabled RuntimeProfile on
// the worker's sandbox backend that asks for one (prewarm_size). Pools are made when the
// worker starts; a profile saved later gets its pool from syncPrewarmPools or its
// first Session, whichever comes first. A pool keeps the size it started with.
func (p *platform) prewarmPools(ctx context.Context) ([]local.PrewarmProfile, error) {
	profiles, err := p.store.ListRuntimeProfiles(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("list runtime profiles for prewarming: %w", err)
	}
	var pools []local.PrewarmProfile
	for _, profile := range profiles {
		if profile.PrewarmSize <= 0 || profile.SandboxBackend != p.cfg.Sandbox.Backend {
			continue
		}
		adapter, err := p.engines.registry.ProfileAdapter(profile.EngineKind, profile.ACPProgram)
		if err != nil {
			p.log.Warn("not prewarming: no Agent program", zap.String("runtime_profile", profile.Name), zap.String("engine_kind", profile.EngineKind), zap.Error(err))
			continue
		}
		spec, err := p.engines.spec(profile, store.Agent{EngineKind: profile.EngineKind}, adapter)
		if err != nil {
			// One profile's bad resources must not keep every box from starting;
			// its Sessions are refused with the same error when they start.
			p.log.Warn("not prewarming: bad box spec", zap.String("runtime_profile", profile.Name), zap.Error(err))
			continue
		}
		pools = append(pools, local.PrewarmProfile{Key: profile.ID, Spec: spec, Size: profile.PrewarmSize})
	}
	return pools, nil
}

// titler is the automatic-title writer when titles.enabled, nil otherwise. It asks the
// Anthropic Messages API at models.anthropic_base_url (the scripted model server under
// `astrabox dev` without credentials, which takes any key).
func (p *platform) titler() (activities.Titler, error) {
	if !p.cfg.Titles.Enabled {
		return nil, nil
	}
	key := p.cfg.Models.AnthropicAPIKey.Reveal()
	if key == "" {
		key = activities.ModelPlaceholderKey
	}
	g, err := titles.New(titles.Config{BaseURL: p.cfg.Models.AnthropicBaseURL, APIKey: key, Model: p.cfg.Titles.Model,
		HTTP: &http.Client{Timeout: time.Minute}})
	if err != nil {
		return nil, err
	}
	p.log.Info("automatic titles on", zap.String("model", p.cfg.Titles.Model), zap.String("model_service", p.cfg.Models.AnthropicBaseURL))
	return g, nil
}

// idleRelease turns sandbox.idle_release (0: keep boxes) into the activities'
// setting, where 0 takes the default and a negative period keeps boxes.
func idleRelease(configured time.Duration) time.Duration {
	if configured == 0 {
		return -1
	}
	return configured
}
