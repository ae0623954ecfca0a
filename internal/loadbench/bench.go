// Package loadbench is the platform's load generator (`astrabox bench`): it starts
// the whole stack as separate processes (PostgreSQL, the Temporal dev server, API
// and worker processes running real boxes with the scripted Agent program and the
// real Claude Code), drives it only through the public API (Sessions, inputs whose
// replies stream deltas, SSE followers) and reports each figure beside a floor
// measured in the same run on the same machine: what the programs emit read
// directly, PostgreSQL's own insert rate for part-sized rows, and a bare HTTP
// handler doing the receipt's single INSERT.
// Everything it starts is stopped at the end, and a process left behind fails the
// run.
package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/faultstack"
	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/internal/reporoot"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/local"
)

// scriptedMount is where the platform binds the scripted program's folder in its
// boxes (engines.scripted.binary); the program floor's boxes use the same.
const scriptedMount = "/opt/astrabox/scripted"

func scriptedMountOf(binary string) sandbox.Mount {
	return sandbox.Mount{Source: filepath.Dir(binary), Target: scriptedMount}
}

// Options bounds a run.
type Options struct {
	// Sessions are the phase sizes, each a separate set of Sessions (default 20, 100).
	Sessions []int
	// Turns is how many measured inputs each Session sends, one after the other.
	Turns int
	// Deltas is how many text deltas each reply streams, Gap apart.
	Deltas int
	Gap    time.Duration
	// Followers is the SSE followers per Session; a phase holds at most
	// MaxStreams streams, so larger phases have fewer per Session.
	Followers  int
	MaxStreams int
	// Timeout bounds the whole run, start-up and stop included.
	Timeout time.Duration
	// ProfileDir, when set, receives CPU and allocation profiles of the API and
	// worker processes taken during the largest phase.
	ProfileDir string
	// ProfileSeconds is the CPU profile's length.
	ProfileSeconds int
	// Replicas is how many API and how many worker processes run (1 or 2); with two,
	// Sessions alternate between the APIs and Temporal spreads them over the workers,
	// and the last phases stop one worker mid-reply, then kill one (workerGone).
	Replicas int
	// ClaudeSessions, when positive, adds a phase of that many Sessions of the real
	// Claude Code (the pinned release, against the stack's scripted model server)
	// whose time to first part is measured beside the same program run directly.
	ClaudeSessions int
	// IdleRelease is the worker's sandbox.idle_release: how long a Session stays
	// idle before its box is released. Each phase waits for every release after its
	// idle figures and measures what a released Session still costs the worker. It
	// must outlast the warm-up's wait for the phase's slowest cold start, or a
	// Session's measured turn would start in a new box (default 45 s).
	IdleRelease time.Duration
	// Logger receives progress; default none.
	Logger *zap.Logger
}

func (o *Options) defaults() {
	if len(o.Sessions) == 0 {
		o.Sessions = []int{20, 100}
	}
	if o.Turns <= 0 {
		o.Turns = 3
	}
	if o.Deltas <= 0 {
		o.Deltas = 50
	}
	if o.Gap < 0 {
		o.Gap = 0
	}
	if o.Followers <= 0 {
		o.Followers = 10
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 200
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Minute
	}
	if o.ProfileSeconds <= 0 {
		o.ProfileSeconds = 15
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.IdleRelease <= 0 {
		o.IdleRelease = 45 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// followersOf is the SSE followers each of a phase's n Sessions has: Followers, as
// far as the phase's MaxStreams allow, and at least one.
func (o Options) followersOf(n int) int { return max(1, min(o.Followers, o.MaxStreams/n)) }

// Run starts the stack, measures every phase and its floors, prints the table to
// out, and stops everything it started.
func Run(ctx context.Context, opts Options, out io.Writer) (err error) {
	opts.defaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	log := opts.Logger
	loadBefore := loadavg()

	root, err := reporoot.Find()
	if err != nil {
		return err
	}
	slot, err := takeUIDSlot()
	if err != nil {
		return err
	}
	defer slot.release()
	binDir, err := os.MkdirTemp("", "astrabox-bench-")
	if err != nil {
		return fmt.Errorf("make bench folder: %w", err)
	}
	defer os.RemoveAll(binDir)
	if err := os.Chmod(binDir, 0o755); err != nil {
		return fmt.Errorf("chmod bench folder: %w", err)
	}
	binary := filepath.Join(binDir, "scriptagent")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./internal/scriptengine/scriptagent")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the scripted program: %w: %s", err, b)
	}
	if opts.ProfileDir != "" {
		if err := os.MkdirAll(opts.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("profile folder: %w", err)
		}
	}
	if opts.Replicas > 2 {
		return fmt.Errorf("replicas: %d; the load generator runs 1 or 2 API and worker processes", opts.Replicas)
	}
	ports, err := freeport.ReserveN(7)
	if err != nil {
		return err
	}
	debugAddr := map[string]string{"serve": "127.0.0.1:" + strconv.Itoa(ports[0]), "worker": "127.0.0.1:" + strconv.Itoa(ports[1]),
		"serve-2": "127.0.0.1:" + strconv.Itoa(ports[2]), "worker-2": "127.0.0.1:" + strconv.Itoa(ports[3])}
	secondAPI := "127.0.0.1:" + strconv.Itoa(ports[4])
	metricsAddr := map[string]string{"worker": "127.0.0.1:" + strconv.Itoa(ports[5]), "worker-2": "127.0.0.1:" + strconv.Itoa(ports[6])}
	largest := slices.Max(opts.Sessions)
	stackFirst, stackCount := slot.stack()

	log.Info("starting the stack")
	stack, err := faultstack.Start(ctx, faultstack.Options{
		RepoRoot: root,
		Logger:   log.Named("stack"),
		UIDs:     func() (int, int, func(), error) { return stackFirst, stackCount, func() {}, nil },
		// The cluster logs its lock waits and counts its statements, which the bench
		// reports per phase.
		PostgresSettings: clusterSettings(),
		RoleEnv: func(role string) []string {
			env := []string{
				"ASTRABOX_ENGINES_SCRIPTED_BINARY=" + binary,
				"ASTRABOX_DEBUG_PPROF_ADDR=" + debugAddr[role],
				"ASTRABOX_LOG_LEVEL=warn",
				"ASTRABOX_HTTP_MAX_STREAMS_PER_TOKEN=" + strconv.Itoa(opts.MaxStreams+largest+16),
				"ASTRABOX_SANDBOX_MAX_LIVE_BOXES_PER_USER=" + strconv.Itoa(2*largest+16),
				"ASTRABOX_SANDBOX_IDLE_RELEASE=" + opts.IdleRelease.String(),
			}
			if addr, ok := metricsAddr[role]; ok {
				env = append(env, "ASTRABOX_METRICS_LISTEN="+addr)
			}
			return env
		},
	})
	if err != nil {
		return fmt.Errorf("start the stack: %w", err)
	}
	defer func() {
		log.Info("stopping the stack")
		if cerr := stack.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop the stack (logs in %s): %w", stack.LogDir(), cerr))
		}
	}()
	if err := stack.WaitReady(ctx); err != nil {
		return err
	}
	b := &bench{opts: opts, log: log, stack: stack, api: newAPIClient(stack.APIURL(), stack.Token()),
		workerDebug: []string{"http://" + debugAddr["worker"]}, apiDebug: "http://" + debugAddr["serve"],
		workerMetrics: []string{"http://" + metricsAddr["worker"] + "/metrics"},
		apiMetrics:    []string{strings.TrimSuffix(stack.APIURL(), "/api/v1") + "/metrics"}, binary: binary, root: root}
	b.apis = []*apiClient{b.api}
	if opts.Replicas == 2 {
		if err := stack.StartExtra("worker", "worker-2", []string{"ASTRABOX_DEBUG_PPROF_ADDR=" + debugAddr["worker-2"], "ASTRABOX_METRICS_LISTEN=" + metricsAddr["worker-2"]}); err != nil {
			return err
		}
		if err := stack.StartExtra("serve", "serve-2", []string{"ASTRABOX_DEBUG_PPROF_ADDR=" + debugAddr["serve-2"], "ASTRABOX_HTTP_ADDR=" + secondAPI}); err != nil {
			return err
		}
		if err := waitReady(ctx, "http://"+secondAPI+"/readyz"); err != nil {
			return err
		}
		b.workerDebug = append(b.workerDebug, "http://"+debugAddr["worker-2"])
		b.workerMetrics = append(b.workerMetrics, "http://"+metricsAddr["worker-2"]+"/metrics")
		b.apiMetrics = append(b.apiMetrics, "http://"+secondAPI+"/metrics")
		b.apis = append(b.apis, newAPIClient("http://"+secondAPI+"/api/v1", stack.Token()))
	}
	if b.agentID, err = b.scriptedAgent(ctx); err != nil {
		return err
	}
	if err := checkLockWaitsLogged(ctx, stack.DSN()); err != nil {
		return err
	}
	if err := countStatements(ctx, stack.DSN()); err != nil {
		return err
	}
	var rep Report
	floorFirst, floorCount := slot.floor()
	floorOpts := local.Options{StateDir: filepath.Join(binDir, "floor"), UIDFirst: floorFirst, UIDCount: floorCount, RunnerPath: stack.RunnerPath(),
		Egress: floorEgress(stack.Model().URL()), Logger: log.Named("floor")}
	if err := os.MkdirAll(floorOpts.StateDir, 0o755); err != nil {
		return fmt.Errorf("program floor folder: %w", err)
	}
	durable, err := durableFloor(ctx, stack.DSN(), 4, 200, 3*time.Second)
	if err != nil {
		return err
	}
	log.Info("durable floor", zap.Float64("rows_per_s", durable))
	for _, n := range opts.Sessions {
		rows, cpu, err := b.phase(ctx, n, durable, floorOpts, n == largest)
		if err != nil {
			return fmt.Errorf("phase of %d Sessions: %w", n, err)
		}
		rep.Rows = append(rep.Rows, rows...)
		rep.CPU = append(rep.CPU, cpu)
	}
	if opts.ClaudeSessions > 0 {
		rows, cpu, err := b.claudePhase(ctx, opts.ClaudeSessions, floorOpts)
		if err != nil {
			return fmt.Errorf("Claude Code phase of %d Sessions: %w", opts.ClaudeSessions, err)
		}
		rep.Rows = append(rep.Rows, rows...)
		rep.CPU = append(rep.CPU, cpu)
	}
	if opts.Replicas == 2 {
		// Last: they end workers, whose figures the phases read. A rollout's stop
		// first, then a replacement starts, as a rollout's does, and a crash.
		rows, err := b.workerGone(ctx, slices.Min(opts.Sessions), stopped)
		if err != nil {
			return err
		}
		rep.Rows = append(rep.Rows, rows...)
		// The replacement serves neither profiles nor metrics on the first worker's
		// addresses, which its role's environment names.
		if err := b.stack.StartExtra("worker", "worker-3", []string{"ASTRABOX_DEBUG_PPROF_ADDR=", "ASTRABOX_METRICS_LISTEN=127.0.0.1:0"}); err != nil {
			return err
		}
		if rows, err = b.workerGone(ctx, slices.Min(opts.Sessions), killed); err != nil {
			return err
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	rep.Load = fmt.Sprintf("loadavg %s before, %s after; %d CPUs; %d API and %d worker process(es)", loadBefore, loadavg(), numCPU(), opts.Replicas, opts.Replicas)
	rep.Print(out)
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, url string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", url, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
