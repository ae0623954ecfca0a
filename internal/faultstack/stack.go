// Package faultstack runs the whole platform as a deployment does, one process
// per role, so tests and the soak command can break it the way production
// breaks: a managed PostgreSQL cluster, the Temporal dev server as a child
// process on a database file (so it can be SIGKILLed and restarted on the same
// history), the scripted model server, and `astrabox serve` and `astrabox
// worker` as separate processes running real bubblewrap boxes with the pinned
// Claude Code. Its operations kill and restart each of them, and kill a
// Session's box; Close ends everything it started and fails when a process of
// the stack is left behind.
//
// The scripted model server runs inside the harness's own process rather than
// as `astrabox devmodel`: it survives every fault the stack injects all the
// same (no platform process hosts it), and its request log shows what each
// Agent program actually asked the model, which is how a test proves that a
// conversation resumed with its earlier turns.
package faultstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/devmodel"
	"github.com/astrabox/astrabox/internal/devstack"
	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/internal/pgcluster"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/store"
)

// databaseName is the platform's database inside the stack's cluster.
const databaseName = "astrabox"

// Options configures a stack.
type Options struct {
	// RepoRoot is the checkout holding the module, tools/ and bin/temporal;
	// default: reporoot.Find.
	RepoRoot string
	// TemporalBin is the Temporal CLI; default $ASTRABOX_TEMPORAL_BIN, else
	// <RepoRoot>/bin/temporal.
	TemporalBin string
	// SlowDelay paces the scripted model's slow replies; default the server's own.
	SlowDelay time.Duration
	// Logger receives the harness's progress; default none.
	Logger *zap.Logger
	// RoleEnv adds configuration (ASTRABOX_* variables, later ones winning) to the
	// process of a role ("serve" or "worker"); default none.
	RoleEnv func(role string) []string
	// UIDs hands the stack the block of box uids its worker uses; default one
	// block of localtest's (room for 50 boxes).
	UIDs func() (first, count int, release func(), err error)
	// PostgresSettings adds server settings to the cluster's (over the stack's own);
	// default none.
	PostgresSettings map[string]string
}

// Stack is a running platform and the handles to break it.
type Stack struct {
	opts     Options
	log      *zap.Logger
	baseDir  string
	stateDir string
	bin      binaries

	uidFirst, uidCount int
	releaseUIDs        func()

	pgOpts pgcluster.Options
	model  *devmodel.Server

	temporalPort int
	// temporalListened is set once the dev server listened on temporalPort:
	// from then on clients hold that port and every restart keeps it.
	temporalListened bool
	apiPort          int

	// Client talks to the API as the seeded user.
	Client *Client
	// AgentID is the seeded Agent (Claude Code on the local backend).
	AgentID string
	token   string

	mu       sync.Mutex
	pg       *pgcluster.Cluster
	temporal *child
	api      *child
	worker   *child
	// extras are further API and worker processes (StartExtra).
	extras []*child
	starts map[string]int
	closed bool
}

// Start brings the whole stack up and returns once the API answers /readyz.
// On failure it stops what it had started.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.RepoRoot == "" {
		if opts.RepoRoot, err = reporoot.Find(); err != nil {
			return nil, err
		}
	}
	if opts.TemporalBin == "" {
		opts.TemporalBin = os.Getenv("ASTRABOX_TEMPORAL_BIN")
	}
	if opts.TemporalBin == "" {
		opts.TemporalBin = filepath.Join(opts.RepoRoot, "bin", "temporal")
	}
	if _, err := os.Stat(opts.TemporalBin); err != nil {
		return nil, fmt.Errorf("the Temporal CLI is missing (run `make deps`): %w", err)
	}
	s := &Stack{opts: opts, log: opts.Logger, starts: map[string]int{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close(context.WithoutCancel(ctx)))
		}
	}()
	if s.baseDir, err = os.MkdirTemp("", "astrabox-fault-"); err != nil {
		return nil, fmt.Errorf("make stack folder: %w", err)
	}
	// The postgres account and the box accounts must traverse it (the runner
	// binary lives here).
	if err := os.Chmod(s.baseDir, 0o755); err != nil {
		return nil, fmt.Errorf("chmod stack folder: %w", err)
	}
	// Unix socket paths are limited to 108 bytes, so the box state stays short.
	if s.stateDir, err = os.MkdirTemp("", "abx"); err != nil {
		return nil, fmt.Errorf("make box state folder: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(s.baseDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("make log folder: %w", err)
	}
	if s.bin, err = build(ctx, opts.RepoRoot, filepath.Join(s.baseDir, "bin")); err != nil {
		return nil, err
	}
	takeUIDs := opts.UIDs
	if takeUIDs == nil {
		takeUIDs = takeUIDBlock
	}
	if s.uidFirst, s.uidCount, s.releaseUIDs, err = takeUIDs(); err != nil {
		return nil, err
	}
	// Temporal's port is picked when it starts (startTemporal).
	if s.apiPort, err = freeport.Reserve(); err != nil {
		return nil, err
	}
	if err := s.startPostgres(ctx); err != nil {
		return nil, err
	}
	seeded, err := s.migrateAndSeed(ctx)
	if err != nil {
		return nil, err
	}
	s.AgentID = seeded.AgentID
	s.Client = NewClient(s.APIURL(), seeded.Token)
	s.token = seeded.Token

	s.model = devmodel.New(devmodel.Options{SlowDelay: opts.SlowDelay, Logger: s.log.Named("devmodel"), RequestLogSize: 10000})
	if err := s.model.Start(context.WithoutCancel(ctx), "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start the scripted model server: %w", err)
	}
	if err := s.startTemporal(ctx); err != nil {
		return nil, err
	}
	if err := s.StartPlatform(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// APIURL is the API's base URL (…/api/v1).
func (s *Stack) APIURL() string { return fmt.Sprintf("http://127.0.0.1:%d/api/v1", s.apiPort) }

// Token is the seeded administrator's API token.
func (s *Stack) Token() string { return s.token }

// TemporalAddress is the Temporal frontend's host:port.
func (s *Stack) TemporalAddress() string { return "127.0.0.1:" + strconv.Itoa(s.temporalPort) }

// RunnerPath is the in-box runner the stack built, which also launches local boxes.
func (s *Stack) RunnerPath() string { return s.bin.runner }

// LogDir holds the log file of every process of the stack (kept after a failed
// Close).
func (s *Stack) LogDir() string { return filepath.Join(s.baseDir, "logs") }

// Model is the scripted model server the boxes reach.
func (s *Stack) Model() *devmodel.Server { return s.model }

// DSN reaches the platform's database, for the harness's own look-ups.
func (s *Stack) DSN() string { return s.cluster().DSN(databaseName) }

func (s *Stack) cluster() *pgcluster.Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pg
}

// startPostgres starts the stack's cluster on a port of its own; RestartPostgres
// brings it back on the same one.
func (s *Stack) startPostgres(ctx context.Context) error {
	s.pgOpts = pgcluster.Options{
		DataDir:   filepath.Join(s.baseDir, "pg", "data"),
		SocketDir: filepath.Join(s.baseDir, "pg", "run"),
		LogFile:   filepath.Join(s.baseDir, "logs", "postgres.log"),
		// The stack's data is thrown away; durability off for speed on shared CI.
		// Commit timestamps let the load generator time a part from its commit
		// (pg_xact_commit_timestamp), however long its transaction ran.
		Settings: map[string]string{"fsync": "off", "full_page_writes": "off", "max_connections": "200", "track_commit_timestamp": "on"},
		Logger:   s.log.Named("postgres"),
	}
	maps.Copy(s.pgOpts.Settings, s.opts.PostgresSettings)
	if err := os.MkdirAll(filepath.Join(s.baseDir, "pg"), 0o755); err != nil {
		return fmt.Errorf("make postgres folder: %w", err)
	}
	pg, err := pgcluster.StartOnFreePort(ctx, s.pgOpts)
	if err != nil {
		return fmt.Errorf("start postgresql: %w", err)
	}
	s.pgOpts.Port = pg.Port()
	s.mu.Lock()
	s.pg = pg
	s.mu.Unlock()
	if err := pg.CreateDatabase(ctx, databaseName); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// migrateAndSeed migrates the schema and seeds the dev user, token,
// RuntimeProfile and Agent as `astrabox dev` does.
func (s *Stack) migrateAndSeed(ctx context.Context) (*devstack.Seeded, error) {
	st, err := store.Open(ctx, s.DSN(), s.log.Named("store"))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	seeded, err := devstack.Seed(ctx, st, devstack.SeedOptions{
		EnvFile:    filepath.Join(s.baseDir, "dev.env"),
		ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", s.apiPort),
	})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return seeded, nil
}

// maxFollowedStreams bounds the streams the suite and the soak hold open at once
// with the stack's one token: a follower per Session and the fault probe's.
const maxFollowedStreams = 256

// platformEnv is the configuration serve and worker read, through ASTRABOX_*.
func (s *Stack) platformEnv() []string {
	pg := s.cluster()
	return append(os.Environ(),
		"ASTRABOX_REPO_ROOT="+s.opts.RepoRoot,
		"ASTRABOX_LOG_LEVEL=info",
		"ASTRABOX_LOG_FORMAT=console",
		"ASTRABOX_DATABASE_HOST=127.0.0.1",
		"ASTRABOX_DATABASE_PORT="+strconv.Itoa(pg.Port()),
		"ASTRABOX_DATABASE_USER="+pg.Superuser(),
		"ASTRABOX_DATABASE_NAME="+databaseName,
		"ASTRABOX_DATABASE_SSLMODE=disable",
		"ASTRABOX_TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(s.temporalPort),
		"ASTRABOX_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(s.apiPort),
		"ASTRABOX_MODELS_ANTHROPIC_BASE_URL="+s.model.URL(),
		"ASTRABOX_SANDBOX_LOCAL_STATE_DIR="+s.stateDir,
		"ASTRABOX_SANDBOX_LOCAL_UID_BASE="+strconv.Itoa(s.uidFirst),
		"ASTRABOX_SANDBOX_LOCAL_UID_COUNT="+strconv.Itoa(s.uidCount),
		"ASTRABOX_SANDBOX_LOCAL_RUNNER_PATH="+s.bin.runner,
		"ASTRABOX_STARTUP_TIMEOUT=60s",
		// Workers come and go, and other stacks may run on the machine: each worker's
		// metrics listener takes a free port rather than the shared default.
		"ASTRABOX_METRICS_LISTEN=127.0.0.1:0",
		// One user with one token drives every Session of the suite and the soak: the
		// per-user cap on live boxes is raised to what the uid block holds (two uids a
		// box), and the cap on a token's open streams to more than the soak follows at
		// once, since refusing Sessions or streams is not what the faults test.
		"ASTRABOX_SANDBOX_MAX_LIVE_BOXES_PER_USER="+strconv.Itoa(s.uidCount/2),
		"ASTRABOX_HTTP_MAX_STREAMS_PER_TOKEN="+strconv.Itoa(maxFollowedStreams),
	)
}

// startRole starts `astrabox <role>` with the platform's configuration.
func (s *Stack) startRole(role string) (*child, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errStopped
	}
	s.starts[role]++
	s.mu.Unlock()
	env := s.platformEnv()
	if s.opts.RoleEnv != nil {
		env = append(env, s.opts.RoleEnv(role)...)
	}
	c, err := startChild(role, []string{s.bin.astrabox, role}, env, s.logPath(role))
	if err != nil {
		return nil, err
	}
	c.role = role
	return c, nil
}

// StartExtra starts one more process of role ("serve" or "worker"), named name in
// the logs, with env added to the platform's configuration after the role's own (a
// second API needs its own ASTRABOX_HTTP_ADDR). Close stops it with the rest.
func (s *Stack) StartExtra(role, name string, env []string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errStopped
	}
	s.starts[name]++
	s.mu.Unlock()
	full := s.platformEnv()
	if s.opts.RoleEnv != nil {
		full = append(full, s.opts.RoleEnv(role)...)
	}
	c, err := startChild(name, []string{s.bin.astrabox, role}, append(full, env...), s.logPath(name))
	if err != nil {
		return err
	}
	c.role = role
	s.mu.Lock()
	s.extras = append(s.extras, c)
	s.mu.Unlock()
	return nil
}

func (s *Stack) logPath(name string) string {
	return filepath.Join(s.baseDir, "logs", name+".log")
}

// Crashed returns an error naming every process of the stack that exited
// without the stack stopping or killing it.
func (s *Stack) Crashed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, c := range append([]*child{s.temporal, s.api, s.worker}, s.extras...) {
		if c != nil {
			errs = append(errs, c.exitedUnexpectedly())
		}
	}
	return errors.Join(errs...)
}

// LogTails returns the end of every process log, for a failure report.
func (s *Stack) LogTails(max int) string {
	var out string
	for _, name := range []string{"serve", "worker", "temporal", "postgres"} {
		out += fmt.Sprintf("---- %s (%s)\n%s\n", name, s.logPath(name), tail(s.logPath(name), max))
	}
	return out
}
