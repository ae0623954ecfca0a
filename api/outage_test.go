package api

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/store"
)

// TestDatabaseOutageAnswersServiceUnavailable cuts the server off its database
// while it runs, once by taking the database server away (a proxy in front of it
// stops) and once by closing the pool, and expects 503 SERVICE_UNAVAILABLE with
// Retry-After and the envelope on the stream and on a JSON route, never 500.
func TestDatabaseOutageAnswersServiceUnavailable(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T, dsn string) (*store.Store, func()){
		"server gone": func(t *testing.T, dsn string) (*store.Store, func()) {
			proxy := startDBProxy(t, dsn)
			st, err := store.Open(testutil.Context(t), proxy.dsn, testutil.Logger(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st, proxy.stop
		},
		"pool closed": func(t *testing.T, dsn string) (*store.Store, func()) {
			st, err := store.Open(testutil.Context(t), dsn, testutil.Logger(t))
			require.NoError(t, err)
			return st, func() { require.NoError(t, st.Close()) }
		},
	}
	for name, open := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var cut func()
			f := newFixtureOn(t, func(dsn string, o *Options) { o.Store, cut = open(t, dsn) })
			sessionID := f.newSession(f.member)
			f.call("GET", "/api/v1/sessions/"+sessionID, f.member, nil).ok(t)

			cut()
			for _, path := range []string{"/api/v1/sessions/" + sessionID + "/stream", "/api/v1/sessions"} {
				r := f.call("GET", path, f.member, nil)
				r.refused(t, http.StatusServiceUnavailable, CodeServiceUnavailable, "database")
				assert.Equal(t, strconv.Itoa(retryAfterSeconds), r.Header.Get(headerRetryAfter), path)
				assert.Contains(t, r.Header.Get("Content-Type"), "application/json", path)
			}
		})
	}
}

// TestTemporalOutageAnswersServiceUnavailable maps a Temporal frontend that does
// not answer onto 503 with Retry-After, and leaves other errors alone.
func TestTemporalOutageAnswersServiceUnavailable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		serviceerror.NewUnavailable("connection refused"),
		serviceerror.NewDeadlineExceeded("context deadline exceeded"),
	} {
		mapped := toAPIError(fmt.Errorf("signal to session s: %w", err), []ErrorMapper{unavailableErrors})
		assert.Equal(t, http.StatusServiceUnavailable, mapped.Status, "%v", err)
		assert.Equal(t, CodeServiceUnavailable, mapped.Code)
	}
	mapped := toAPIError(serviceerror.NewInvalidArgument("bad"), []ErrorMapper{unavailableErrors})
	assert.Equal(t, http.StatusInternalServerError, mapped.Status)
}

// dbProxy forwards TCP connections to PostgreSQL until stop, which closes its
// listener and every connection it carries, as a database server going away does.
type dbProxy struct {
	dsn string
	ln  net.Listener

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func startDBProxy(t *testing.T, dsn string) *dbProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u.Host = ln.Addr().String()
	p := &dbProxy{dsn: u.String(), ln: ln}
	p.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			if !p.track(client, server) {
				return
			}
			p.wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
			p.wg.Go(func() { _, _ = io.Copy(client, server); client.Close() })
		}
	})
	t.Cleanup(p.stop)
	return p
}

// track records a forwarded pair; false (and both closed) once the proxy stopped.
func (p *dbProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

func (p *dbProxy) stop() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for _, c := range p.conns {
			_ = c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}
