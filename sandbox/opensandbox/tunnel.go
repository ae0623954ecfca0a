package opensandbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// A remote box reaches the platform's egress (the model services, a
// profile's tracing endpoint) through a tunnel the worker holding the box
// keeps open to the box's runner (runnerapi.TunnelPath): the runner listens on
// each forward's loopback port and hands every connection to the worker, which
// serves it with the same credential proxy the local backend's forwarder runs.
// Nothing in the box can dial the platform and the credentials stay on the
// worker.
//
// The box's forwards travel in its environment (runnerapi.EnvForwards); a
// worker that takes the box over reads them back from the runner and trusts
// them only when their MAC, made with the runner key at create and kept in the
// box's metadata (LabelForwards), matches: a box cannot make the worker's
// proxy lead anywhere its spec did not.

// LabelForwards holds the MAC of the box's forwards.
const LabelForwards = "astrabox.io/forwards-mac"

// forwardsMAC authenticates a box's forwards (raw, as in EnvForwards) for the
// box with nonce.
func (b *Backend) forwardsMAC(nonce, raw string) string {
	m := hmac.New(sha256.New, b.opts.RunnerKey)
	m.Write([]byte("forwards\x00" + nonce + "\x00" + raw))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// routes is where each forward leads: the upstream its spec names (no
// credential, only its paths), or else the service configured under its name.
func (b *Backend) routes(forwards []sandbox.Forward) (map[string]http.Handler, error) {
	out := make(map[string]http.Handler, len(forwards))
	for _, f := range forwards {
		route := egress.Route{Upstream: f.Upstream, Paths: f.Paths}
		if f.Upstream == "" {
			var ok bool
			if route, ok = b.opts.Egress[f.Name]; !ok {
				return nil, fmt.Errorf("forward %q: no egress route of that name is configured", f.Name)
			}
		}
		proxy, err := route.Proxy()
		if err != nil {
			return nil, fmt.Errorf("forward %q: %w", f.Name, err)
		}
		out[f.Name] = proxy
	}
	return out, nil
}

// tunnels are the egress tunnels this backend keeps, by box.
type tunnels struct {
	mu   sync.Mutex
	byID map[string]*tunnel
	wg   sync.WaitGroup
}

type tunnel struct {
	cancel context.CancelFunc
	// up is closed once the first tunnel is established.
	up chan struct{}
}

// holdTunnel starts keeping the box's tunnel unless it is kept already.
// forwards, when nil, are read back from the runner and checked against mac.
// It returns a channel closed once the tunnel is first established.
func (b *Backend) holdTunnel(id string, c *runnerapi.Client, nonce, mac string, forwards []sandbox.Forward) <-chan struct{} {
	b.tunnels.mu.Lock()
	defer b.tunnels.mu.Unlock()
	if t, ok := b.tunnels.byID[id]; ok {
		return t.up
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &tunnel{cancel: cancel, up: make(chan struct{})}
	b.tunnels.byID[id] = t
	b.tunnels.wg.Add(1)
	go func() {
		defer b.tunnels.wg.Done()
		b.keepTunnel(ctx, id, c, nonce, mac, forwards, t.up)
		b.tunnels.mu.Lock()
		if b.tunnels.byID[id] == t {
			delete(b.tunnels.byID, id)
		}
		b.tunnels.mu.Unlock()
		cancel()
	}()
	return t.up
}

// dropTunnel stops keeping the box's tunnel (the box is being deleted).
func (b *Backend) dropTunnel(id string) {
	b.tunnels.mu.Lock()
	defer b.tunnels.mu.Unlock()
	if t, ok := b.tunnels.byID[id]; ok {
		t.cancel()
		delete(b.tunnels.byID, id)
	}
}

// closeTunnels stops every tunnel and waits for their keepers.
func (b *Backend) closeTunnels() {
	b.tunnels.mu.Lock()
	for id, t := range b.tunnels.byID {
		t.cancel()
		delete(b.tunnels.byID, id)
	}
	b.tunnels.mu.Unlock()
	b.tunnels.wg.Wait()
}

// keepTunnel opens the box's tunnel and serves it, and opens it again when it
// breaks (a network failure, a restarted runner), until ctx ends, the box is
// gone, or the runner says another worker's tunnel replaced it.
func (b *Backend) keepTunnel(ctx context.Context, id string, c *runnerapi.Client, nonce, mac string, forwards []sandbox.Forward, up chan struct{}) {
	log := b.log.With(zap.String("box", id))
	var routes map[string]http.Handler
	var upOnce sync.Once
	backoff := b.opts.PollInterval / 4
	for {
		var err error
		if routes == nil {
			routes, err = b.tunnelRoutes(ctx, c, nonce, mac, forwards)
		}
		if err == nil {
			var sess *yamux.Session
			if sess, err = c.OpenTunnel(ctx); err == nil {
				upOnce.Do(func() { close(up) })
				if serveTunnel(ctx, sess, routes, log) {
					log.Info("opensandbox: egress tunnel taken over by another worker")
					return
				}
				backoff = b.opts.PollInterval / 4
				err = errors.New("tunnel closed")
			}
		}
		if errors.Is(err, errForwardsForged) {
			log.Error("opensandbox: egress tunnel refused", zap.Error(err))
			return
		}
		if ctx.Err() != nil || b.boxEnded(ctx, id) {
			return
		}
		log.Debug("opensandbox: egress tunnel down, reopening", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-b.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

var errForwardsForged = errors.New("the runner's forwards do not match the box's forwards MAC")

// tunnelRoutes are the routes of forwards, or of the forwards the runner
// reports when it is nil, which must match mac.
func (b *Backend) tunnelRoutes(ctx context.Context, c *runnerapi.Client, nonce, mac string, forwards []sandbox.Forward) (map[string]http.Handler, error) {
	if forwards == nil {
		raw, err := c.TunnelForwards(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the box's forwards: %w", err)
		}
		if !hmac.Equal([]byte(b.forwardsMAC(nonce, raw)), []byte(mac)) {
			return nil, errForwardsForged
		}
		if err := json.Unmarshal([]byte(raw), &forwards); err != nil {
			return nil, fmt.Errorf("%w: %v", errForwardsForged, err)
		}
	}
	routes, err := b.routes(forwards)
	if err != nil {
		// The configuration changed since the box was made: nothing to serve.
		return nil, fmt.Errorf("%w: %v", errForwardsForged, err)
	}
	return routes, nil
}

// boxEnded reports whether the server has lost or ended the box.
func (b *Backend) boxEnded(ctx context.Context, id string) bool {
	qctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	in, err := b.api.get(qctx, id)
	if errors.Is(err, errNotFound) {
		return true
	}
	return err == nil && toInfo(in).Death != nil
}

// serveTunnel serves the runner's streams with the forwards' handlers until
// the tunnel or ctx ends; it reports whether the runner said the tunnel was
// replaced by another worker's.
func serveTunnel(ctx context.Context, sess *yamux.Session, routes map[string]http.Handler, log *zap.Logger) (replaced bool) {
	ln := &streamListener{sess: sess, conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second, ErrorLog: zap.NewStdLog(log),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			routes[r.Context().Value(forwardKey{}).(string)].ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, forwardKey{}, c.(namedStream).name)
		}}
	var mu sync.Mutex
	go func() {
		defer close(ln.done)
		for {
			st, err := sess.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
				name, conn, err := runnerapi.ReadStreamName(st)
				_ = st.SetReadDeadline(time.Time{})
				switch {
				case err != nil:
					st.Close()
				case name == runnerapi.TunnelReplaced:
					mu.Lock()
					replaced = true
					mu.Unlock()
					st.Close()
					sess.Close()
				case routes[name] == nil:
					log.Warn("opensandbox: tunnel stream for an unknown forward", zap.String("forward", name))
					st.Close()
				default:
					select {
					case ln.conns <- namedStream{Conn: conn, name: name}:
					case <-sess.CloseChan():
						st.Close()
					}
				}
			}()
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			sess.Close()
		case <-sess.CloseChan():
		}
	}()
	_ = srv.Serve(ln)
	_ = srv.Close()
	sess.Close()
	mu.Lock()
	defer mu.Unlock()
	return replaced
}

type forwardKey struct{}

// namedStream is a tunnel stream for the forward name.
type namedStream struct {
	net.Conn
	name string
}

// streamListener hands the tunnel's named streams to an http.Server.
type streamListener struct {
	sess  *yamux.Session
	conns chan net.Conn
	done  chan struct{}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.sess.CloseChan():
		return nil, net.ErrClosed
	}
}

func (l *streamListener) Close() error   { return l.sess.Close() }
func (l *streamListener) Addr() net.Addr { return l.sess.Addr() }

// heldTunnels is how many boxes' tunnels the backend keeps.
func (b *Backend) heldTunnels() int {
	b.tunnels.mu.Lock()
	defer b.tunnels.mu.Unlock()
	return len(b.tunnels.byID)
}
