package opensandbox

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// Options configure the OpenSandbox backend.
type Options struct {
	// URL is the lifecycle API's base URL, with its /v1 (https://osb.example.com/v1).
	URL string
	// APIKey is sent in OPEN-SANDBOX-API-KEY.
	APIKey string
	// RunnerKey derives each box's runner token (HMAC of a per-box nonce kept in
	// the box's metadata), so a restarted worker can reach the boxes it finds. It
	// never leaves the platform; boxes see only their own token.
	RunnerKey []byte
	// Deployment names this AstraBox deployment in every box's labels: List and
	// Reap see only its own boxes, so deployments can share one OpenSandbox.
	Deployment string
	// HTTPClient carries the lifecycle API's and the runners' requests (TLS,
	// proxies); nil builds one with RequestTimeout for dialing and headers. It must
	// not set Timeout: output streams are long-lived.
	HTTPClient *http.Client
	// Entrypoint is the image's runner command (default: astrabox-runner serve
	// -listen :RunnerPort from /usr/local/bin).
	Entrypoint []string
	// RunnerPort is the runner's port in the box (default 9494).
	RunnerPort int
	// RunnerScheme is how the runner's endpoint is reached: http (default) or
	// https, for a gateway that terminates TLS in front of the box.
	RunnerScheme string
	// UseServerProxy reaches the runner through the OpenSandbox server's own
	// proxy (endpoints?use_server_proxy=true), for servers whose boxes the
	// worker cannot reach directly.
	UseServerProxy bool
	// ProgramUID and ProgramGID are the image's program account (default
	// 1000:1000); the runner stays root and keeps its token from it.
	ProgramUID, ProgramGID int
	// StateDir is the runner's state folder in the box (default /run/astrabox).
	StateDir string
	// DefaultLimits apply to resources a spec leaves zero; resourceLimits is
	// required by the API (default cpu 1, memory 2 GiB).
	DefaultLimits sandbox.Limits
	// ReadyTimeout bounds Create: the box Running, its runner answering and its
	// resident services ready (default 3 minutes).
	ReadyTimeout time.Duration
	// PollInterval is how often Create, Pause, Resume and Watch ask for the
	// box's state (default 1 s).
	PollInterval time.Duration
	// RequestTimeout bounds one lifecycle request (default 30 s).
	RequestTimeout time.Duration
	// Attempts is how often a request answered 429 or 5xx, or not answered, is
	// tried in all (default 5), with backoff from RetryBackoff (default 500 ms,
	// doubling to 15 s, with jitter; Retry-After is honoured).
	Attempts     int
	RetryBackoff time.Duration
	// RenewBefore renews a box's expiry when it is this close (default 10
	// minutes), by RenewFor (default one hour): a box the platform holds must not
	// expire under a server's default time-to-live. Boxes whose spec set a
	// Timeout are left to expire.
	RenewBefore, RenewFor time.Duration
	// NoRenewal leaves expiry to other processes (the API's, which only reach
	// boxes; workers renew).
	NoRenewal bool
	// Egress is where the boxes' forwards without an upstream of their own lead
	// (the model services, with their credentials), by forward name: the worker
	// serves them through each box's egress tunnel. A spec with a forward of
	// another name is refused.
	Egress map[string]egress.Route
	// NoTunnels leaves the boxes' egress tunnels to the worker holding them
	// (the API process only reaches boxes).
	NoTunnels bool
	Logger    *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.RunnerPort == 0 {
		o.RunnerPort = runnerapi.DefaultPort
	}
	if len(o.Entrypoint) == 0 {
		o.Entrypoint = []string{"/usr/local/bin/astrabox-runner", "serve", "-listen", fmt.Sprintf(":%d", o.RunnerPort)}
	}
	if o.RunnerScheme == "" {
		o.RunnerScheme = "http"
	}
	if o.ProgramUID == 0 && o.ProgramGID == 0 {
		o.ProgramUID, o.ProgramGID = 1000, 1000
	}
	if o.StateDir == "" {
		o.StateDir = runnerapi.ControlDir
	}
	if o.DefaultLimits.CPUMillis == 0 {
		o.DefaultLimits.CPUMillis = 1000
	}
	if o.DefaultLimits.MemoryBytes == 0 {
		o.DefaultLimits.MemoryBytes = 2 << 30
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Attempts == 0 {
		o.Attempts = 5
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 500 * time.Millisecond
	}
	if o.RenewBefore == 0 {
		o.RenewBefore = 10 * time.Minute
	}
	if o.RenewFor == 0 {
		o.RenewFor = time.Hour
	}
	if o.Deployment == "" {
		o.Deployment = "astrabox"
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 0
		tr.TLSHandshakeTimeout = o.RequestTimeout
		o.HTTPClient = &http.Client{Transport: tr}
	}
	return o
}

func (o Options) validate() error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("opensandbox: url %q is not an http or https URL", o.URL)
	}
	if o.APIKey == "" {
		return errors.New("opensandbox: an API key is required")
	}
	if len(o.RunnerKey) < 16 {
		return errors.New("opensandbox: a runner key of at least 16 bytes is required")
	}
	if o.RunnerScheme != "http" && o.RunnerScheme != "https" {
		return fmt.Errorf("opensandbox: runner scheme %q is not http or https", o.RunnerScheme)
	}
	if !labelValue.MatchString(o.Deployment) {
		return fmt.Errorf("opensandbox: deployment %q is not a label value (letters, digits, -_. up to 63)", o.Deployment)
	}
	return nil
}
