package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// tunnelWait is how long a forwarded connection waits for a worker's tunnel
// (one being re-established after a worker restart) before it is closed.
const tunnelWait = 30 * time.Second

// tunnelHub holds the egress tunnel the worker holding the box opened
// (runnerapi.TunnelPath). The newest tunnel wins: a worker that takes over
// the box replaces its predecessor's, which is told so and closed.
type tunnelHub struct {
	mu   sync.Mutex
	sess *yamux.Session
	// changed is closed, and replaced, whenever sess changes.
	changed chan struct{}
	wait    time.Duration
	logger  *log.Logger
}

func newTunnelHub(logger *log.Logger) *tunnelHub {
	return &tunnelHub{changed: make(chan struct{}), wait: tunnelWait, logger: logger}
}

func (t *tunnelHub) current() (*yamux.Session, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess, t.changed
}

// replace makes s the tunnel and drops the one before.
func (t *tunnelHub) replace(s *yamux.Session) {
	t.mu.Lock()
	old := t.sess
	t.sess = s
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	if old != nil {
		go dropReplaced(old)
	}
}

// dropReplaced tells a replaced tunnel's holder to stop reconnecting, gives it
// a moment to read that, and closes the tunnel.
func dropReplaced(s *yamux.Session) {
	defer s.Close()
	st, err := s.OpenStream()
	if err != nil {
		return
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(2 * time.Second))
	if runnerapi.WriteStreamName(st, runnerapi.TunnelReplaced) == nil {
		_, _ = io.Copy(io.Discard, st) // until the holder closes it
	}
}

// close ends the tunnel (the runner is stopping).
func (t *tunnelHub) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sess != nil {
		t.sess.Close()
	}
}

// open opens a stream for a connection to the forward name, waiting for a
// tunnel while there is none.
func (t *tunnelHub) open(ctx context.Context, name string) (net.Conn, error) {
	t.mu.Lock()
	wait := t.wait
	t.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s, changed := t.current()
		if s != nil && !s.IsClosed() {
			st, err := s.OpenStream()
			if err == nil {
				if err := runnerapi.WriteStreamName(st, name); err != nil {
					st.Close()
					return nil, err
				}
				return st, nil
			}
			if !s.IsClosed() {
				return nil, fmt.Errorf("open tunnel stream: %w", err)
			}
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, errors.New("no egress tunnel: no worker holds the box")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// serveTunnel accepts loopback connections to the forward name and hands each
// to the tunnel.
func (t *tunnelHub) serveTunnel(ctx context.Context, ln net.Listener, name string) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				t.logger.Printf("tunnel %s: accept: %v", name, err)
			}
			return
		}
		go func() {
			up, err := t.open(ctx, name)
			if err != nil {
				t.logger.Printf("tunnel %s: %v", name, err)
				conn.Close()
				return
			}
			pipe(conn, up)
		}()
	}
}

// handleTunnel takes the worker's egress tunnel: the upgraded connection
// carries a yamux session in which the runner opens the streams.
func (r *Runner) handleTunnel(w http.ResponseWriter, req *http.Request) {
	if len(r.cfg.Tunnels) == 0 {
		writeError(w, fmt.Errorf("%w: the box has no tunnelled forwards", sandbox.ErrInvalidSpec))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, errors.New("connection cannot be upgraded"))
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: yamux\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	s, err := yamux.Client(readerConn{Conn: conn, r: buf.Reader}, runnerapi.TunnelConfig())
	if err != nil {
		conn.Close()
		return
	}
	r.tunnel.replace(s)
}

// readerConn reads through the buffer the request was parsed from.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
