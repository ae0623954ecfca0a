// Package local is the embedded sandbox backend: one bubblewrap box per
// conversation on this machine, each with its own host uid and gid from a
// configured range, a 0700 workspace bound read-write, a read-only image root
// (the host's system directories or an unpacked root filesystem), no network but
// loopback and declared forwards, and cgroup limits where the machine has them.
// Boxes run detached from the worker (own session, no --die-with-parent) and
// are recorded on disk, so a restarted worker finds them again.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/procwait"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/prewarm"
)

// Backend is the local bubblewrap backend.
type Backend struct {
	opts     Options
	log      *zap.Logger
	cg       *cgroups
	instance string
	pool     *prewarm.Pool
	// pidfds is whether the kernel gives processes pidfds: the box's processes'
	// exits are then awaited without holding a thread each (procwait).
	pidfds bool
	// reaper waits for the boxes' and their forwarders' exits, all on one goroutine.
	reaper procwait.Reaper
	// self is this worker process (pid and start time), which the boxes it makes
	// record as their maker.
	self struct {
		pid   int
		start uint64
	}
	// makingHook, when set, runs at the stages of a Create (stageRecorded,
	// stageLaunched): tests hold a creation there, where another worker process
	// starting on the machine finds it.
	makingHook func(id, stage string)

	mu      sync.Mutex
	boxes   map[string]*box
	nextUID int
	closed  bool
	done    chan struct{} // closed by Close: background work stops
}

var _ sandbox.Backend = (*Backend)(nil)

// box is the in-memory state of one box.
type box struct {
	dir string

	mu         sync.Mutex
	rec        record
	death      *sandbox.Death
	dead       chan struct{}
	destroying bool
	expired    bool
	released   bool
	creating   bool // Create has not returned yet: Reap leaves the box alone
}

func (x *box) record() record {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.rec
}

func (x *box) deathInfo() *sandbox.Death {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.death
}

// New checks the machine, loads the boxes an earlier worker left running (and
// notes those that died meanwhile) and starts the prewarm pools.
func New(ctx context.Context, opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	if err := opts.preflight(); err != nil {
		return nil, err
	}
	for _, d := range []string{opts.StateDir, filepath.Join(opts.StateDir, "boxes"), filepath.Join(opts.StateDir, "volumes")} {
		// 0711: box accounts must traverse to their own bound folders but may
		// not list anyone else's.
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("local sandbox: create state dir %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, fmt.Errorf("local sandbox: chmod state dir %s: %w", d, err)
		}
	}
	b := &Backend{opts: opts, log: opts.Logger, cg: detectCgroups(opts.CgroupRoot, opts.CgroupParent),
		instance: newID("pool-"), boxes: map[string]*box{}, done: make(chan struct{}), pidfds: procwait.Supported()}
	b.self.pid = os.Getpid()
	if start, ok := procStart(b.self.pid); ok {
		b.self.start = start
	} else {
		return nil, fmt.Errorf("local sandbox: read this process's start time from /proc")
	}
	for _, note := range b.cg.notes {
		b.log.Warn("local sandbox: " + note)
	}
	if err := b.adoptAll(ctx); err != nil {
		return nil, err
	}
	profiles := make([]prewarm.Profile, 0, len(opts.Prewarm))
	for _, p := range opts.Prewarm {
		pr, err := b.prewarmProfile(p)
		if err != nil {
			if errors.Is(err, errPersistentPrewarm) {
				return nil, err
			}
			// Limits this machine cannot grant, say: that pool stays empty, and
			// its Sessions get the same error when they create their boxes.
			b.log.Warn("local sandbox: not prewarming an invalid profile", zap.String("profile", p.Key), zap.Error(err))
			continue
		}
		profiles = append(profiles, pr)
	}
	b.pool = prewarm.New(profiles, b.createForPool, b.Destroy, b.log)
	b.pool.Start(context.WithoutCancel(ctx))
	return b, nil
}

// errPersistentPrewarm refuses a prewarm pool with a persistent workspace: a box
// made before its Session exists cannot hold that Session's workspace.
var errPersistentPrewarm = errors.New("a persistent workspace cannot be prewarmed")

// prewarmProfile checks a prewarm pool's spec against this machine.
func (b *Backend) prewarmProfile(p PrewarmProfile) (prewarm.Profile, error) {
	spec := p.Spec.WithDefaults()
	spec.ProfileKey = p.Key
	if err := b.validate(spec); err != nil {
		return prewarm.Profile{}, err
	}
	if spec.Workspace.Kind == sandbox.WorkspacePersistent {
		return prewarm.Profile{}, fmt.Errorf("local sandbox: prewarm profile %q: %w", p.Key, errPersistentPrewarm)
	}
	return prewarm.Profile{Key: p.Key, Spec: spec, Size: p.Size}, nil
}

// EnsurePrewarm implements sandbox.Prewarmer: it starts the pool of a profile saved
// after the backend started. A pool it already keeps is left as it is.
func (b *Backend) EnsurePrewarm(profileKey string, spec sandbox.Spec, size int) (bool, error) {
	pr, err := b.prewarmProfile(PrewarmProfile{Key: profileKey, Spec: spec, Size: size})
	if err != nil {
		return false, fmt.Errorf("prewarm profile %s: %w", profileKey, err)
	}
	return b.pool.Ensure(pr), nil
}

var _ sandbox.Prewarmer = (*Backend)(nil)

// Capabilities reports what this machine allows.
func (b *Backend) Capabilities() sandbox.Capabilities {
	c := sandbox.Capabilities{ProcessSessions: true, IsolatedAccounts: true, Pause: true, Prewarm: true,
		PersistentWorkspace: true, ResourceLimits: b.cg.have["memory"] || b.cg.have["pids"] || b.cg.have["cpu"]}
	c.Notes = append(c.Notes, b.cg.notes...)
	return c
}

// Pool exposes the prewarm pools (for readiness checks and tests).
func (b *Backend) Pool() *prewarm.Pool { return b.pool }

// Create starts a box and returns when it is ready.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	return b.create(ctx, spec, "")
}

func (b *Backend) createForPool(ctx context.Context, _ string, spec sandbox.Spec) (sandbox.Handle, error) {
	return b.create(ctx, spec, b.instance)
}

// Claim hands out a prewarmed box of the profile, ready before the call.
func (b *Backend) Claim(ctx context.Context, profileKey string) (sandbox.Handle, error) {
	for {
		h, ok := b.pool.Take(profileKey)
		if !ok {
			return nil, sandbox.ErrNoWarmBox
		}
		x, err := b.lookup(h.ID())
		if err != nil || x.deathInfo() != nil {
			h.Close()
			continue // died while waiting; its watcher removes it
		}
		x.mu.Lock()
		x.rec.Pool = ""
		err = writeRecord(x.dir, x.rec)
		x.mu.Unlock()
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("claim %s: %w", h.ID(), err)
		}
		return h, nil
	}
}

// Get returns a handle on a known box.
func (b *Backend) Get(_ context.Context, id string) (sandbox.Handle, error) {
	x, err := b.lookup(id)
	if err != nil {
		return nil, err
	}
	return b.newHandle(x), nil
}

// lookup returns the box id, adopting it when another worker process on this
// machine made it.
func (b *Backend) lookup(id string) (*box, error) {
	b.mu.Lock()
	x, ok := b.boxes[id]
	b.mu.Unlock()
	if ok {
		return x, nil
	}
	return b.adopt(id)
}

// List describes every known box.
func (b *Backend) List(_ context.Context) ([]sandbox.Info, error) {
	b.mu.Lock()
	all := make([]*box, 0, len(b.boxes))
	for _, x := range b.boxes {
		all = append(all, x)
	}
	b.mu.Unlock()
	out := make([]sandbox.Info, 0, len(all))
	for _, x := range all {
		out = append(out, b.info(x))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (b *Backend) info(x *box) sandbox.Info {
	x.mu.Lock()
	defer x.mu.Unlock()
	in := sandbox.Info{ID: x.rec.ID, State: sandbox.StateRunning, CreatedAt: x.rec.CreatedAt,
		ProfileKey: x.rec.Spec.ProfileKey, Metadata: x.rec.Spec.Metadata, BootID: x.rec.BootID, UID: x.rec.UID}
	if x.rec.Paused {
		in.State = sandbox.StatePaused
	}
	if x.death != nil {
		d := *x.death
		in.Death = &d
		in.State = sandbox.StateFailed
		if d.Reason == "destroyed" || d.Reason == "released" || d.Reason == "expired" {
			in.State = sandbox.StateTerminated
		}
	}
	return in
}

// Close stops the pools (destroying unclaimed prewarmed boxes) and stops
// watching. Claimed boxes keep running, and so do their egress forwarders with
// the model streams in flight; the next backend adopts both. The boxes' parent
// cgroups are removed unless a box is still in them.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.ReadyTimeout)
	defer cancel()
	err := b.pool.Close(ctx)
	b.cg.removeParent()
	return err
}

// validate checks a spec against this machine before anything starts.
func (b *Backend) validate(spec sandbox.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := checkImage(spec); err != nil {
		return err
	}
	if err := b.checkLimits(spec.Limits.Or(b.opts.DefaultLimits)); err != nil {
		return err
	}
	for _, m := range spec.Mounts {
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("%w: mount source %q: %v", sandbox.ErrInvalidSpec, m.Source, err)
		}
	}
	for _, f := range spec.Network.Forwards {
		if _, ok := b.opts.Egress[f.Name]; !ok && f.Upstream == "" {
			return fmt.Errorf("%w: forward %q has no egress service configured on this host", sandbox.ErrInvalidSpec, f.Name)
		}
	}
	if spec.Image.URI != "" && spec.Image.Root == "" {
		return fmt.Errorf("%w: the local backend runs image directories, not image URIs (%q)", sandbox.ErrInvalidSpec, spec.Image.URI)
	}
	return nil
}

var errClosed = errors.New("local sandbox: backend closed")
