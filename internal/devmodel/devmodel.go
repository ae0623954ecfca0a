// Package devmodel is AstraBox's scripted model server: a local stand-in for the
// Anthropic Messages API, the OpenAI Responses and Chat Completions APIs and the
// Gemini API that the real Agent programs (Claude Code, Codex CLI, Pi, the ACP
// programs) can be pointed at when no model service is reachable. Replies are deterministic and chosen by a
// `[[script:NAME ...]]` directive in the prompt (see docs/devmodel.md): plain
// text, thinking, shell and file-write tool calls, slow paced replies and HTTP
// errors. Every request is logged and kept in a log tests can inspect.
package devmodel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DefaultAddr is where `astrabox devmodel` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:18080"

// DefaultSlowDelay paces the chunks of the slow script unless the directive or
// Options say otherwise.
const DefaultSlowDelay = 250 * time.Millisecond

// Options configure a Server.
type Options struct {
	// Addr is the loopback TCP address Run listens on; empty means DefaultAddr.
	// Start takes its address as an argument instead.
	Addr string
	// Logger receives one line per request; nil logs nothing.
	Logger *zap.Logger
	// SlowDelay is the pause between chunks of the slow script; zero means
	// DefaultSlowDelay.
	SlowDelay time.Duration
	// RequestLogSize is how many requests Requests keeps; zero means
	// DefaultRequestLogSize.
	RequestLogSize int
	// OnListening, if set, is called by Run once the listener is open, with the
	// server's base URL, so a caller can wait for readiness instead of polling.
	OnListening func(url string)
}

// Server is the scripted model server. Create it with New, then either Start it
// on a loopback TCP address or Serve it on any listener (such as a unix socket
// bound into a sandbox), or mount Handler yourself.
type Server struct {
	log      *zap.Logger
	scripter *scripter
	handler  http.Handler
	requests *requestLog

	// ctx is cancelled by Close; every request context derives from it, so a
	// slow reply stops when the server does.
	ctx    context.Context
	cancel context.CancelFunc
	http   *http.Server

	mu     sync.Mutex
	url    string
	closed bool
	// inflight counts handlers still running, so Close returns only after the
	// last one has logged.
	inflight sync.WaitGroup
}

// New builds a Server; it listens on nothing until Start or Serve.
func New(opts Options) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	slow := opts.SlowDelay
	if slow <= 0 {
		slow = DefaultSlowDelay
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:      logger.Named("devmodel"),
		scripter: newScripter(slow),
		requests: newRequestLog(opts.RequestLogSize),
		ctx:      ctx,
		cancel:   cancel,
	}
	s.handler = s.track(s.routes())
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	return s
}

// Handler returns the HTTP handler serving every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr, which must be a loopback address (port 0 picks a free
// port), and serves in the background until ctx is done or Close is called.
func (s *Server) Start(ctx context.Context, addr string) error {
	if err := checkLoopback(addr); err != nil {
		return err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.mu.Lock()
	s.url = "http://" + l.Addr().String()
	s.mu.Unlock()
	go func() {
		if err := s.Serve(l); err != nil {
			s.log.Error("serve stopped", zap.Error(err))
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.ctx.Done():
		}
	}()
	s.log.Info("scripted model server listening", zap.String("url", s.URL()))
	return nil
}

// Serve serves on l until Close; it returns nil after a Close.
func (s *Server) Serve(l net.Listener) error {
	if err := s.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve scripted model: %w", err)
	}
	return nil
}

// URL is the base URL of the TCP listener opened by Start, such as
// http://127.0.0.1:40123 (use it as ANTHROPIC_BASE_URL, or with /v1 appended as
// an OpenAI base URL). It is empty before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops every listener, cancels replies still streaming and waits for
// their handlers to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	err := s.http.Close()
	s.inflight.Wait()
	if err != nil {
		return fmt.Errorf("close scripted model server: %w", err)
	}
	return nil
}

// track counts running handlers and refuses new requests once Close began.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			http.Error(w, "scripted model server is closing", http.StatusServiceUnavailable)
			return
		}
		s.inflight.Add(1)
		s.mu.Unlock()
		defer s.inflight.Done()
		next.ServeHTTP(w, r)
	})
}

// Requests returns a copy of the request log (the newest RequestLogSize
// requests), oldest first.
func (s *Server) Requests() []Request { return s.requests.snapshot() }

// WaitFor blocks until a logged request satisfies match (checking those already
// logged first) and returns it; a request is offered to match when it arrives and
// again when it finishes. It fails when ctx ends first.
func (s *Server) WaitFor(ctx context.Context, match func(Request) bool) (Request, error) {
	return s.requests.waitFor(ctx, match)
}

// Run serves opts.Addr until ctx is done; it is what `astrabox devmodel` calls.
func Run(ctx context.Context, opts Options) error {
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	s := New(opts)
	if err := s.Start(ctx, addr); err != nil {
		return err
	}
	if opts.OnListening != nil {
		opts.OnListening(s.URL())
	}
	<-ctx.Done()
	return s.Close()
}

// checkLoopback refuses addresses other machines could reach: the server accepts
// any key, so it must only be reachable from this machine (and from sandboxes
// through the sockets the platform binds into them).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("parse listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q is not a loopback address", addr)
	}
	return nil
}
