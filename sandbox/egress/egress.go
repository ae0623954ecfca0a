// Package egress serves, on the host, what a box may reach: one unix socket per
// box and service, in a folder bound into the box, owned by the box account
// that connects (the box's runner on the local backend). The first service is
// the model: an HTTP reverse proxy that adds the real credential on the host
// side, so the box only ever holds a placeholder key.
//
// A box's sockets are served by its forwarder (Serve, run as `astrabox-runner
// egress`), a small host process that outlives the worker that started it, so a
// worker restart does not cut the model streams in flight.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// CredentialProxy forwards HTTP requests to an upstream service and sets the
// credential headers there. Whatever the box sent in those headers (its
// placeholder) is dropped first, as are the other headers in Strip.
type CredentialProxy struct {
	proxy *httputil.ReverseProxy
	// paths are the request paths the box may use; empty allows every path.
	paths []string
}

var _ http.Handler = (*CredentialProxy)(nil)

// NewCredentialProxy returns a proxy to upstream (scheme and host; a path prefix
// is joined in front of the box's path). set holds the credential headers, for
// example {"x-api-key": key} for Anthropic or {"Authorization": "Bearer " + key}
// for OpenAI; strip names further headers to remove.
func NewCredentialProxy(upstream *url.URL, set map[string]string, strip ...string) *CredentialProxy {
	setHeader := http.Header{}
	for k, v := range set {
		setHeader.Set(k, v)
	}
	drop := make([]string, 0, len(strip)+len(setHeader)+2)
	for k := range setHeader {
		drop = append(drop, k)
	}
	// Either spelling of an API credential the box sends is its placeholder.
	drop = append(drop, "Authorization", "X-Api-Key")
	drop = append(drop, strip...)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = upstream.Host
			for _, h := range drop {
				pr.Out.Header.Del(h)
			}
			for k, v := range setHeader {
				pr.Out.Header[k] = v
			}
		},
		// Model replies stream (SSE): pass every chunk on at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			// Never echo upstream details to the box: they might carry the credential.
			http.Error(w, "egress: upstream unavailable", http.StatusBadGateway)
		},
	}
	return &CredentialProxy{proxy: rp}
}

// OnlyPaths limits the proxy to requests for exactly these paths (the query is
// free): the real credential then reaches the model API's own endpoints and no
// other path of the upstream a program might try. A path may hold path.Match
// wildcards, where the API names its resource in the path (the Gemini API's
// /v1beta/models/*:streamGenerateContent); a '*' never spans a '/'. It returns p.
func (p *CredentialProxy) OnlyPaths(paths ...string) *CredentialProxy {
	p.paths = append([]string(nil), paths...)
	return p
}

// ServeHTTP proxies one request, or refuses one for a path the proxy does not
// allow without forwarding anything.
func (p *CredentialProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.allows(r.URL) {
		http.Error(w, "egress: path not allowed", http.StatusForbidden)
		return
	}
	// A proxy reads the request body while it writes the reply. Without full
	// duplex the server, on the reply's first write, consumes and closes what it
	// believes is an unread body; the proxy's own last read of that body then
	// fails, its transport drops the upstream connection and the model stream
	// breaks off under the program (which asks again).
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		http.Error(w, "egress: connection cannot carry a streamed reply", http.StatusInternalServerError)
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// allows reports whether u names an allowed path. An escaped spelling that
// decodes differently ("%2F", "..") is refused rather than interpreted.
func (p *CredentialProxy) allows(u *url.URL) bool {
	if len(p.paths) == 0 {
		return true
	}
	if u.RawPath != "" && u.RawPath != u.Path {
		return false
	}
	return slices.ContainsFunc(p.paths, func(pattern string) bool {
		ok, err := path.Match(pattern, u.Path)
		return err == nil && ok
	})
}

// Server serves a handler on one box's unix socket.
type Server struct {
	path string
	// inode is the socket file this server made: a successor may have replaced
	// the path, and closing must not remove the successor's socket.
	inode os.FileInfo
	srv   *http.Server
	done  chan struct{}
}

// Listen creates the socket at path (replacing a stale one, or one a forwarder
// being replaced still serves its open requests on), gives it to uid/gid with
// mode 0600 so only that box can connect, and serves h on it until Close.
func Listen(path string, uid, gid int, h http.Handler) (*Server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// The path is removed by Close only while it is still this socket.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chown %s: %w", path, err)
	}
	inode, err := os.Stat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	s := &Server{path: path, inode: inode, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Path is the socket's host path.
func (s *Server) Path() string { return s.path }

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.Drain(ctx)
}

// Drain stops accepting connections, waits until the requests in progress (a
// streamed model reply) have finished or ctx ends, then closes what is left and
// removes the socket if it is still this server's.
func (s *Server) Drain(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	if st, statErr := os.Stat(s.path); statErr == nil && os.SameFile(st, s.inode) {
		if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = rmErr
		}
	}
	if err != nil && !strings.Contains(err.Error(), "closed") {
		return fmt.Errorf("close egress %s: %w", s.path, err)
	}
	return nil
}
