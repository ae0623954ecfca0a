package egress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"time"
)

// DefaultDrainTimeout is how long a forwarder asked to stop keeps serving the
// requests already in progress: long enough for a model reply to finish.
const DefaultDrainTimeout = 10 * time.Minute

// Route is where one forward leads: the upstream service (scheme, host and an
// optional path prefix) and the credential headers set on the host side.
type Route struct {
	Upstream string            `json:"upstream"`
	Headers  map[string]string `json:"headers,omitempty"`
	// Paths are the request paths the box may send (the model API's endpoints);
	// any other is refused with 403 and never reaches the upstream. A path may
	// hold path.Match wildcards ('*' within one segment). Empty allows every path.
	Paths []string `json:"paths,omitempty"`
}

// Proxy builds the route's credential proxy.
func (r Route) Proxy() (*CredentialProxy, error) {
	u, err := url.Parse(r.Upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", r.Upstream, err)
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("upstream %q: want scheme and host", r.Upstream)
	}
	return NewCredentialProxy(u, r.Headers).OnlyPaths(r.Paths...), nil
}

// ForwarderConfig is what one box's forwarder serves: a socket
// <Dir>/<name>.sock per route, owned by UID/GID. It holds the real credentials,
// so it is handed to the forwarder on its stdin, never on a command line or in
// a file the box can see.
type ForwarderConfig struct {
	Dir    string           `json:"dir"`
	UID    int              `json:"uid"`
	GID    int              `json:"gid"`
	Routes map[string]Route `json:"routes"`
	// DrainTimeout bounds how long requests in progress may run on after the
	// forwarder is asked to stop. Zero means DefaultDrainTimeout.
	DrainTimeout time.Duration `json:"drain_timeout,omitempty"`
	// BoxPID is the host pid of the box's outermost process: the forwarder ends
	// when it does, even when no worker is there to stop it. Zero: not watched.
	BoxPID int `json:"box_pid,omitempty"`
}

// Digest identifies the configuration: a worker that finds a running forwarder
// with the same digest adopts it, and replaces it otherwise (a rotated
// credential).
func (c ForwarderConfig) Digest() string {
	raw, _ := json.Marshal(c)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Serve listens on every route's socket, calls ready once all of them accept
// connections, and serves until ctx ends. Then it stops accepting and lets the
// requests in progress finish (up to the drain timeout): a forwarder replaced by
// one with a new credential does not cut the replies it is streaming.
func Serve(ctx context.Context, cfg ForwarderConfig, ready func()) error {
	if len(cfg.Routes) == 0 {
		return errors.New("no routes to serve")
	}
	names := make([]string, 0, len(cfg.Routes))
	for name := range cfg.Routes {
		names = append(names, name)
	}
	slices.Sort(names)
	var servers []*Server
	drain := func() error {
		timeout := cfg.DrainTimeout
		if timeout <= 0 {
			timeout = DefaultDrainTimeout
		}
		dctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Drain(dctx))
		}
		return errors.Join(errs...)
	}
	for _, name := range names {
		proxy, err := cfg.Routes[name].Proxy()
		if err != nil {
			return errors.Join(fmt.Errorf("route %q: %w", name, err), drain())
		}
		srv, err := Listen(filepath.Join(cfg.Dir, name+".sock"), cfg.UID, cfg.GID, proxy)
		if err != nil {
			return errors.Join(fmt.Errorf("route %q: %w", name, err), drain())
		}
		servers = append(servers, srv)
	}
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	return drain()
}
