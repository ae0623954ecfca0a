// Package opensandbox is a sandbox backend on an OpenSandbox deployment
// (alibaba/OpenSandbox): boxes are sandboxes made through its lifecycle API from
// an image whose entry point is the in-box runner (`astrabox-runner serve
// -listen`), reached through the sandbox's endpoint for the runner's port with a
// per-box token. Process sessions, exec, files, the workspace files API,
// terminals and ports all go through the runner, as on the local backend, so
// their semantics (journalled output, idempotent stdin, the program account)
// are the same. docs/sandboxes.md maps every call.
package opensandbox

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// Labels every box of the backend carries in its metadata.
const (
	// LabelManaged marks a box made by AstraBox.
	LabelManaged = "astrabox.io/managed"
	// LabelDeployment names the deployment (Options.Deployment).
	LabelDeployment = "astrabox.io/deployment"
	// LabelProfile is the RuntimeProfile key (Spec.ProfileKey).
	LabelProfile = "astrabox.io/profile"
	// LabelNonce derives the box's runner token with the runner key.
	LabelNonce = "astrabox.io/runner-nonce"
	// LabelBounded marks a box whose spec set a Timeout: it is left to expire.
	LabelBounded = "astrabox.io/bounded"
)

var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)

// Backend is the OpenSandbox backend.
type Backend struct {
	opts Options
	api  *lifecycle
	log  *zap.Logger

	tunnels tunnels

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ sandbox.Backend = (*Backend)(nil)

// New checks the options and starts the loop that renews the expiry of the
// deployment's boxes (unless NoRenewal). It does not call the server: an unreachable server
// fails the first box, not the worker's start.
func New(opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, log: opts.Logger, stop: make(chan struct{}), tunnels: tunnels{byID: map[string]*tunnel{}},
		api: &lifecycle{base: strings.TrimSuffix(opts.URL, "/"), apiKey: opts.APIKey, hc: opts.HTTPClient,
			attempts: opts.Attempts, backoff: opts.RetryBackoff, maxBackoff: 15 * time.Second, timeout: opts.RequestTimeout}}
	if !opts.NoRenewal {
		b.wg.Add(1)
		go b.renewLoop()
	}
	return b, nil
}

// Capabilities reports DeclaredCapabilities.
func (b *Backend) Capabilities() sandbox.Capabilities { return DeclaredCapabilities() }

// DeclaredCapabilities is what every box of the backend can do, known without
// a server (the API process validates RuntimeProfiles with it): process
// sessions through the runner; pause and cpu and memory limits through the
// server; one container per box, so one account per box but no isolated
// conversations in a shared box; no prewarm pools (OpenSandbox's own pools are
// Kubernetes-only).
func DeclaredCapabilities() sandbox.Capabilities {
	return sandbox.Capabilities{ProcessSessions: true, IsolatedAccounts: true, Pause: true, PersistentWorkspace: true,
		ResourceLimits: true, Notes: []string{
			"forwards reach the worker's egress through a tunnel the worker holds to the box's runner; host mounts are refused",
			"only cpu and memory limits are sent; pids, tmp and disk limits are refused",
			"pause is refused by servers whose runtime cannot pause (Kubernetes without BatchSandbox)",
		}}
}

// token is the runner token of the box with nonce.
func (b *Backend) token(nonce string) string {
	m := hmac.New(sha256.New, b.opts.RunnerKey)
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

func (b *Backend) labels() map[string]string {
	return map[string]string{LabelManaged: "true", LabelDeployment: b.opts.Deployment}
}

// Create makes a sandbox from spec, waits until it is Running and its runner
// answers, then starts the resident services. A box that does not become ready
// within ReadyTimeout is deleted.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	spec = spec.WithDefaults()
	req, err := b.createRequest(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	created, err := b.api.create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("opensandbox: create box: %w", err)
	}
	h, err := b.ready(ctx, created.ID, req.Metadata[LabelNonce], spec)
	if err != nil {
		// A box that never became ready is ours alone: do not leave it running.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.RequestTimeout)
		defer dcancel()
		if derr := b.Destroy(dctx, created.ID); derr != nil {
			b.log.Warn("opensandbox: delete box that did not become ready", zap.String("box", created.ID), zap.Error(derr))
		}
		return nil, err
	}
	return h, nil
}

// createRequest maps a spec onto CreateSandboxRequest, refusing what a remote
// box cannot have.
func (b *Backend) createRequest(spec sandbox.Spec) (createRequest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: opensandbox: %s", sandbox.ErrInvalidSpec, fmt.Sprintf(format, args...))
	}
	if err := spec.Validate(); err != nil {
		return createRequest{}, err
	}
	if spec.Image.URI == "" {
		return createRequest{}, bad("a box needs an image reference (the RuntimeProfile's image), not an image directory (%q)", spec.Image.Root)
	}
	if len(spec.Mounts) > 0 {
		return createRequest{}, bad("host mounts (%s) cannot reach a remote box; the image must hold them", spec.Mounts[0].Source)
	}
	if _, err := b.routes(spec.Network.Forwards); err != nil {
		return createRequest{}, bad("%v", err)
	}
	limits := spec.Limits.Or(b.opts.DefaultLimits)
	if limits.Pids > 0 || limits.TmpBytes > 0 || limits.WorkspaceBytes > 0 {
		return createRequest{}, bad("only cpu and memory limits can be given to OpenSandbox (pids, tmp and disk cannot)")
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return createRequest{}, fmt.Errorf("opensandbox: runner nonce: %w", err)
	}
	nonce := hex.EncodeToString(raw[:])
	env := map[string]string{}
	for k, v := range spec.Env {
		if strings.HasPrefix(k, runnerapi.EnvPrefix) {
			return createRequest{}, bad("environment name %q is reserved for the runner", k)
		}
		env[k] = v
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = spec.Identity.Home
	}
	env[runnerapi.EnvToken] = b.token(nonce)
	env[runnerapi.EnvWorkspace] = spec.Workspace.MountPath
	env[runnerapi.EnvStateDir] = b.opts.StateDir
	env[runnerapi.EnvProgramUID] = strconv.Itoa(b.opts.ProgramUID)
	env[runnerapi.EnvProgramGID] = strconv.Itoa(b.opts.ProgramGID)
	meta := map[string]string{}
	for k, v := range spec.Metadata {
		if strings.HasPrefix(k, "astrabox.io/") || strings.HasPrefix(k, "opensandbox.io/") {
			return createRequest{}, bad("metadata key %q is reserved", k)
		}
		meta[k] = v
	}
	for k, v := range b.labels() {
		meta[k] = v
	}
	meta[LabelNonce] = nonce
	if len(spec.Network.Forwards) > 0 {
		raw, err := json.Marshal(spec.Network.Forwards)
		if err != nil {
			return createRequest{}, fmt.Errorf("opensandbox: encode forwards: %w", err)
		}
		env[runnerapi.EnvForwards] = string(raw)
		meta[LabelForwards] = b.forwardsMAC(nonce, string(raw))
	}
	if spec.ProfileKey != "" {
		if !labelValue.MatchString(spec.ProfileKey) {
			return createRequest{}, bad("profile key %q is not a label value", spec.ProfileKey)
		}
		meta[LabelProfile] = spec.ProfileKey
	}
	req := createRequest{Image: imageSpec{URI: spec.Image.URI}, Entrypoint: b.opts.Entrypoint, Env: env, Metadata: meta,
		ResourceLimits: map[string]string{"cpu": fmt.Sprintf("%dm", limits.CPUMillis), "memory": strconv.FormatInt(limits.MemoryBytes, 10)}}
	if spec.Timeout > 0 {
		secs := max(int((spec.Timeout+time.Second-1)/time.Second), 60) // the API's minimum
		req.Timeout = &secs
		meta[LabelBounded] = "true"
	}
	if spec.Network.Mode == sandbox.NetworkNone {
		req.NetworkPolicy = &networkPolicy{DefaultAction: "deny", Egress: []any{}}
	}
	if spec.Workspace.Kind == sandbox.WorkspacePersistent {
		req.Volumes = []volume{{Name: "workspace", MountPath: spec.Workspace.MountPath, PVC: &pvcVolume{ClaimName: spec.Workspace.Volume}}}
	}
	return req, nil
}

// ready waits until the box is Running and its runner answers, then starts and
// waits for the resident services.
func (b *Backend) ready(ctx context.Context, id, nonce string, spec sandbox.Spec) (*handle, error) {
	if err := b.waitState(ctx, id, "Running"); err != nil {
		return nil, err
	}
	h, err := b.connect(ctx, id, nonce)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(b.opts.PollInterval / 4)
	defer tick.Stop()
	for {
		_, err := h.Client().Info(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			h.Close()
			return nil, fmt.Errorf("opensandbox: box %s: runner not answering: %w (last error: %v)", id, ctx.Err(), err)
		case <-tick.C:
		}
	}
	if len(spec.Network.Forwards) > 0 && !b.opts.NoTunnels {
		// The forwards lead somewhere before any program starts.
		up := b.holdTunnel(id, h.Client(), nonce, "", spec.Network.Forwards)
		select {
		case <-up:
		case <-ctx.Done():
			b.dropTunnel(id)
			return nil, fmt.Errorf("opensandbox: box %s: egress tunnel not established: %w", id, ctx.Err())
		}
	}
	for _, svc := range spec.Services {
		if _, err := h.Client().StartProcess(ctx, svc.Process); err != nil {
			h.Close()
			return nil, &sandbox.NotReadyError{Service: svc.Process.ID, Port: svc.ReadyPort, Reason: err.Error()}
		}
		if svc.ReadyPort > 0 {
			if err := h.waitService(ctx, svc); err != nil {
				h.Close()
				return nil, err
			}
		}
	}
	return h, nil
}

// waitState polls the box until it is in state, failing early when it ended.
func (b *Backend) waitState(ctx context.Context, id, want string) error {
	tick := time.NewTicker(b.opts.PollInterval)
	defer tick.Stop()
	last := "unknown" // the last state the server reported
	for {
		info, err := b.api.get(ctx, id)
		if errors.Is(err, errNotFound) {
			return fmt.Errorf("opensandbox: box %s: %w (gone while waiting for %s)", id, sandbox.ErrBoxLost, want)
		}
		if err == nil {
			last = info.Status.State
			switch info.Status.State {
			case want:
				return nil
			case "Failed", "Terminated", "Stopping":
				return fmt.Errorf("opensandbox: box %s: %w: %s %s: %s", id, sandbox.ErrBoxLost, info.Status.State,
					info.Status.Reason, info.Status.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("opensandbox: box %s not %s: %w (state %q, last error: %v)", id, want, ctx.Err(), last, err)
		case <-tick.C:
		}
	}
}

// connect builds a handle on the box's runner through its endpoint.
func (b *Backend) connect(ctx context.Context, id, nonce string) (*handle, error) {
	if nonce == "" {
		return nil, fmt.Errorf("opensandbox: box %s has no runner nonce: %w", id, sandbox.ErrNotFound)
	}
	ep, err := b.api.endpoint(ctx, id, b.opts.RunnerPort, b.opts.UseServerProxy)
	if err != nil {
		return nil, b.lost(id, fmt.Errorf("opensandbox: endpoint of box %s: %w", id, err))
	}
	base := ep.Endpoint
	if !strings.Contains(base, "://") {
		base = b.opts.RunnerScheme + "://" + base
	}
	hc := b.opts.HTTPClient
	if len(ep.Headers) > 0 {
		hc = &http.Client{Transport: headerTransport{base: transportOf(hc), headers: ep.Headers}}
	}
	return b.newHandle(id, runnerapi.NewHTTPClient(base, b.token(nonce), hc)), nil
}

// headerTransport adds the headers an endpoint asks for (a gateway's access
// token) to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}

// lost marks err as ErrNotFound when the box is unknown to the server.
func (b *Backend) lost(id string, err error) error {
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("box %q: %w: %v", id, sandbox.ErrNotFound, err)
	}
	return err
}

// Claim has no prewarmed boxes to hand out.
func (b *Backend) Claim(context.Context, string) (sandbox.Handle, error) {
	return nil, sandbox.ErrNoWarmBox
}

// Get returns a handle on a box of this deployment, also one made before a
// worker restart. A box with forwards gets its egress tunnel from this worker
// from now on (unless NoTunnels): a restarted worker takes over the tunnel of
// the boxes it holds.
func (b *Backend) Get(ctx context.Context, id string) (sandbox.Handle, error) {
	h, info, err := b.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if mac := info.Metadata[LabelForwards]; mac != "" && !b.opts.NoTunnels {
		b.holdTunnel(id, h.Client(), info.Metadata[LabelNonce], mac, nil)
	}
	return h, nil
}

func (b *Backend) get(ctx context.Context, id string) (*handle, sandboxInfo, error) {
	info, err := b.api.get(ctx, id)
	if err != nil {
		return nil, info, b.lost(id, fmt.Errorf("opensandbox: get box %s: %w", id, err))
	}
	if !b.ours(info) {
		return nil, info, fmt.Errorf("box %q belongs to no AstraBox deployment %q: %w", id, b.opts.Deployment, sandbox.ErrNotFound)
	}
	h, err := b.connect(ctx, id, info.Metadata[LabelNonce])
	return h, info, err
}

func (b *Backend) ours(info sandboxInfo) bool {
	return info.Metadata[LabelManaged] == "true" && info.Metadata[LabelDeployment] == b.opts.Deployment
}

// List describes every box of this deployment the server has.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	all, err := b.api.list(ctx, b.labels())
	if err != nil {
		return nil, fmt.Errorf("opensandbox: list boxes: %w", err)
	}
	out := make([]sandbox.Info, 0, len(all))
	for _, in := range all {
		if b.ours(in) {
			out = append(out, toInfo(in))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// toInfo maps a Sandbox onto Info; the backend's own labels are left out of
// the metadata.
func toInfo(in sandboxInfo) sandbox.Info {
	out := sandbox.Info{ID: in.ID, CreatedAt: in.CreatedAt, ProfileKey: in.Metadata[LabelProfile], Metadata: map[string]string{}}
	for k, v := range in.Metadata {
		if !strings.HasPrefix(k, "astrabox.io/") {
			out.Metadata[k] = v
		}
	}
	switch in.Status.State {
	case "Running", "Resuming":
		out.State = sandbox.StateRunning
	case "Paused", "Pausing":
		out.State = sandbox.StatePaused
	case "Terminated", "Stopping":
		out.State = sandbox.StateTerminated
		out.Death = deathOf(in)
	case "Failed":
		out.State = sandbox.StateFailed
		out.Death = deathOf(in)
	default:
		out.State = sandbox.StatePending
	}
	return out
}

func deathOf(in sandboxInfo) *sandbox.Death {
	d := &sandbox.Death{BoxID: in.ID, Reason: "runner_exited", Message: strings.TrimSpace(in.Status.Reason + ": " + in.Status.Message), At: time.Now().UTC()}
	if in.Status.LastTransitionAt != nil {
		d.At = *in.Status.LastTransitionAt
	}
	if strings.Contains(strings.ToLower(in.Status.Reason+in.Status.Message), "expire") {
		d.Reason = "expired"
	}
	return d
}

// Release asks the runner to stop its processes gracefully, then deletes the
// box; a persistent workspace's volume is kept by the server.
func (b *Backend) Release(ctx context.Context, id string) error {
	if h, _, err := b.get(ctx, id); err == nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = h.Client().Shutdown(sctx, 5*time.Second)
		cancel()
		h.Close()
	}
	return b.Destroy(ctx, id)
}

// Destroy deletes the box; an unknown box is not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	b.dropTunnel(id)
	err := b.api.delete(ctx, id)
	if err == nil || errors.Is(err, errNotFound) {
		return nil
	}
	return fmt.Errorf("opensandbox: delete box %s: %w", id, err)
}

// Pause freezes the box and waits until the server reports it Paused.
func (b *Backend) Pause(ctx context.Context, id string) error {
	if err := b.api.pause(ctx, id); err != nil {
		return b.lost(id, fmt.Errorf("opensandbox: pause box %s: %w", id, err))
	}
	return b.waitState(ctx, id, "Paused")
}

// Resume thaws the box and waits until the server reports it Running.
func (b *Backend) Resume(ctx context.Context, id string) error {
	if err := b.api.resume(ctx, id); err != nil {
		return b.lost(id, fmt.Errorf("opensandbox: resume box %s: %w", id, err))
	}
	return b.waitState(ctx, id, "Running")
}

// Renew moves the box's expiry to until.
func (b *Backend) Renew(ctx context.Context, id string, until time.Time) (time.Time, error) {
	at, err := b.api.renew(ctx, id, until)
	if err != nil {
		return time.Time{}, b.lost(id, fmt.Errorf("opensandbox: renew box %s: %w", id, err))
	}
	return at, nil
}

// Watch polls the box's state: OpenSandbox pushes no events. The box is lost
// when the server no longer has it ("vanished") or reports it Terminated or
// Failed; a failed poll is retried, since a lost connection is not a death.
func (b *Backend) Watch(ctx context.Context, id string) (<-chan sandbox.Death, error) {
	if _, err := b.api.get(ctx, id); err != nil && !errors.Is(err, errNotFound) {
		return nil, fmt.Errorf("opensandbox: watch box %s: %w", id, err)
	}
	out := make(chan sandbox.Death, 1)
	go func() {
		defer close(out)
		tick := time.NewTicker(b.opts.PollInterval)
		defer tick.Stop()
		for {
			info, err := b.api.get(ctx, id)
			switch {
			case errors.Is(err, errNotFound):
				out <- sandbox.Death{BoxID: id, Reason: "vanished", Message: "the OpenSandbox server no longer has the box", At: time.Now().UTC()}
				return
			case err == nil:
				if d := toInfo(info).Death; d != nil {
					out <- *d
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-b.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return out, nil
}

// Reap deletes every box of this deployment that keep does not claim.
func (b *Backend) Reap(ctx context.Context, keep func(id string) bool) ([]string, error) {
	all, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	var reaped []string
	var errs []error
	for _, in := range all {
		if keep(in.ID) {
			continue
		}
		if err := b.Destroy(ctx, in.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped = append(reaped, in.ID)
	}
	return reaped, errors.Join(errs...)
}

// renewLoop keeps the deployment's unbounded boxes from expiring under the
// server's default time-to-live.
func (b *Backend) renewLoop() {
	defer b.wg.Done()
	period := min(b.opts.RenewBefore/4, time.Minute)
	tick := time.NewTicker(max(period, b.opts.PollInterval))
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.RequestTimeout)
		b.renewDue(ctx)
		cancel()
	}
}

func (b *Backend) renewDue(ctx context.Context) {
	all, err := b.api.list(ctx, b.labels())
	if err != nil {
		b.log.Warn("opensandbox: list boxes to renew", zap.Error(err))
		return
	}
	for _, in := range all {
		if !b.ours(in) || in.ExpiresAt == nil || in.Metadata[LabelBounded] == "true" || time.Until(*in.ExpiresAt) > b.opts.RenewBefore {
			continue
		}
		switch in.Status.State {
		case "Terminated", "Failed", "Stopping":
			continue
		}
		if _, err := b.Renew(ctx, in.ID, time.Now().Add(b.opts.RenewFor)); err != nil {
			b.log.Warn("opensandbox: renew box expiry", zap.String("box", in.ID), zap.Error(err))
		}
	}
}

// Close stops renewing, watching and serving egress tunnels; boxes keep
// running (their forwarded connections wait for the next worker's tunnel).
func (b *Backend) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	b.wg.Wait()
	b.closeTunnels()
	b.opts.HTTPClient.CloseIdleConnections()
	return nil
}
