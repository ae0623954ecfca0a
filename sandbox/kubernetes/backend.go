// Package kubernetes is the sandbox backend for a Kubernetes cluster running
// kubernetes-sigs/agent-sandbox: every box is an agent-sandbox Sandbox (one pod
// and its headless service) made from a SandboxTemplate that the box's
// RuntimeProfile names, or one handed out of a SandboxWarmPool through a
// SandboxClaim. The pod's box container runs the in-box runner, which the
// worker reaches over TCP through the Sandbox's service with a bearer token kept
// in a Secret beside the box. A sidecar serves the box's egress forwards (the
// model credential stays out of the box container). Everything the backend
// needs to find its boxes again lives in the cluster (labels, annotations,
// Secrets), so a restarted worker lists and drives the boxes an earlier one made.
//
// It speaks to the API server through client-go's dynamic client only, so the
// agent-sandbox Go module is not a dependency; the objects it writes follow the
// agent-sandbox CRDs vendored in testdata/crds (see SOURCE.txt there).
package kubernetes

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
)

// The agent-sandbox resources (served version v1beta1) and the core ones the
// backend writes.
var (
	SandboxResource  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	TemplateResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	WarmPoolResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	ClaimResource    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	SecretResource   = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	PVCResource      = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
)

// Labels and annotations the backend puts on what it creates.
const (
	// LabelManagedBy holds Options.Instance on every object of this deployment:
	// List and Reap select by it.
	LabelManagedBy = "astrabox.dev/managed-by"
	// LabelBox holds the box id on the Sandbox or SandboxClaim and its Secret.
	LabelBox = "astrabox.dev/box"
	// LabelPool marks a prewarm pool's SandboxTemplate, Secret and SandboxWarmPool.
	LabelPool = "astrabox.dev/pool"
	// AnnotationProfile holds the RuntimeProfile key the box was made for.
	AnnotationProfile = "astrabox.dev/profile"
	// AnnotationMetadata holds Spec.Metadata as JSON.
	AnnotationMetadata = "astrabox.dev/metadata"
	// AnnotationRunnerSecret names the Secret holding the box runner's
	// configuration and token.
	AnnotationRunnerSecret = "astrabox.dev/runner-secret"
)

// Options configure the backend.
type Options struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace holds every box (required).
	Namespace string
	// Instance names this deployment in the LabelManagedBy label (default "astrabox").
	Instance string
	// Templates maps a RuntimeProfile key to the SandboxTemplate its boxes are made
	// from; a profile not listed uses DefaultTemplate.
	Templates map[string]string
	// DefaultTemplate is the SandboxTemplate of every other profile.
	DefaultTemplate string
	// BoxContainer names the template's container that runs the runner (default
	// the first container).
	BoxContainer string
	// RunnerCommand starts the runner in the box container (default
	// ["astrabox-runner"]); "serve -config FILE" is appended.
	RunnerCommand []string
	// RunnerPort is the TCP port the runner serves on inside the pod (default 7070).
	RunnerPort int
	// RunAsUser is the account of the box's containers (default 1000): the
	// egress sidecar gives its sockets to it.
	RunAsUser int64
	// Egress maps a forward name to the service it leads to, with the credential
	// the sidecar adds; the box container never sees it.
	Egress map[string]egress.Route
	// WorkspaceSize is the size requested for a persistent workspace's volume when
	// the spec sets no disk limit (default 10Gi); StorageClass its class.
	WorkspaceSize int64
	StorageClass  string
	// DefaultLimits fill the limits a spec leaves out.
	DefaultLimits sandbox.Limits
	// ReadyTimeout bounds the wait for a Sandbox to become Ready and its runner
	// to answer (default 5 minutes: a pod may pull its image first).
	ReadyTimeout time.Duration
	// PollInterval is how often readiness and death are checked (default 1s).
	PollInterval time.Duration
	// Logger logs lifecycle events (default a no-op logger).
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.Instance == "" {
		o.Instance = "astrabox"
	}
	if len(o.RunnerCommand) == 0 {
		o.RunnerCommand = []string{"astrabox-runner"}
	}
	if o.RunnerPort == 0 {
		o.RunnerPort = 7070
	}
	if o.RunAsUser == 0 {
		o.RunAsUser = 1000
	}
	if o.WorkspaceSize == 0 {
		o.WorkspaceSize = 10 << 30
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Backend is the Kubernetes sandbox backend.
type Backend struct {
	opts Options
	log  *zap.Logger

	mu        sync.Mutex
	destroyed map[string]bool // boxes this process deleted: their death reads "destroyed"
	done      chan struct{}
	closed    bool
}

var (
	_ sandbox.Backend   = (*Backend)(nil)
	_ sandbox.Prewarmer = (*Backend)(nil)
)

// New checks the options. It does not reach the cluster: the first box does.
func New(opts Options) (*Backend, error) {
	opts = opts.withDefaults()
	switch {
	case opts.Client == nil:
		return nil, errors.New("kubernetes sandbox: no API client")
	case opts.Namespace == "":
		return nil, errors.New("kubernetes sandbox: no namespace")
	case opts.DefaultTemplate == "" && len(opts.Templates) == 0:
		return nil, errors.New("kubernetes sandbox: no SandboxTemplate configured (default_template or templates)")
	case opts.RunnerPort < 1 || opts.RunnerPort > 65535:
		return nil, fmt.Errorf("kubernetes sandbox: runner port %d out of range", opts.RunnerPort)
	}
	for name, r := range opts.Egress {
		if _, err := r.Proxy(); err != nil {
			return nil, fmt.Errorf("kubernetes sandbox: egress %q: %w", name, err)
		}
	}
	return &Backend{opts: opts, log: opts.Logger, destroyed: map[string]bool{}, done: make(chan struct{})}, nil
}

// Capabilities says what boxes on agent-sandbox give, and what they do not.
func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		ProcessSessions:     true,
		IsolatedAccounts:    true,
		Prewarm:             true,
		PersistentWorkspace: true,
		ResourceLimits:      true,
		Notes: []string{
			"pause suspends the Sandbox (operatingMode Suspended): its pod and processes end and resume starts a new runner, so Pause is not a freeze",
			"each box is its own pod: the runner and the program share the pod's account, and pods cannot see each other's files",
			"process limits (pids) are the node's (kubelet podPidsLimit), not set per box",
			"host directories (Spec.Mounts) are not bound: the template's image holds the Agent programs at the same paths",
		},
	}
}

// templateFor is the SandboxTemplate a profile's boxes are made from.
func (b *Backend) templateFor(profileKey string) (string, error) {
	if t, ok := b.opts.Templates[profileKey]; ok {
		return t, nil
	}
	// Configuration files lower-case map keys; profile ids are UUIDs, whose case
	// carries no meaning.
	if t, ok := b.opts.Templates[strings.ToLower(profileKey)]; ok {
		return t, nil
	}
	if b.opts.DefaultTemplate == "" {
		return "", fmt.Errorf("%w: no SandboxTemplate for runtime profile %q", sandbox.ErrInvalidSpec, profileKey)
	}
	return b.opts.DefaultTemplate, nil
}

// Close stops the backend's watchers. Boxes and prewarm pools stay: they are
// the cluster's, shared by every worker of the deployment.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	return nil
}

func (b *Backend) markDestroyed(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.destroyed[id] = true
}

func (b *Backend) wasDestroyed(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.destroyed[id]
}
