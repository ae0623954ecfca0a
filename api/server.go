// Package api is AstraBox's HTTP surface on Gin: the public REST API under
// /api/v1, the health routes, request ids and access logs, and the one mapper
// that turns errors into the product's {code, message, data} envelope.
package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// Options configures a Server.
type Options struct {
	Logger *zap.Logger
	// Checks are the dependencies /readyz reports on.
	Checks []Check
	// ErrorMappers translate domain errors into envelopes.
	ErrorMappers []ErrorMapper
}

// Server owns the Gin engine and its routes.
type Server struct {
	log          *zap.Logger
	engine       *gin.Engine
	checks       []Check
	errorMappers []ErrorMapper
}

// New builds the server and its routes.
func New(opts Options) *Server {
	s := &Server{
		log:          opts.Logger,
		engine:       gin.New(),
		checks:       opts.Checks,
		errorMappers: opts.ErrorMappers,
	}
	s.engine.HandleMethodNotAllowed = true
	s.engine.Use(s.requestContext, s.recoverPanic)
	s.engine.NoRoute(func(c *gin.Context) { s.fail(c, NotFound("route "+c.Request.URL.Path)) })
	s.engine.NoMethod(func(c *gin.Context) {
		s.fail(c, &Error{Status: http.StatusMethodNotAllowed, Code: CodeInvalidRequest, Message: "method " + c.Request.Method + " not allowed here"})
	})
	s.engine.GET("/healthz", s.healthz)
	s.engine.GET("/readyz", s.readyz)
	return s
}

// Handler returns the HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.engine }

// Listen binds addr, reporting a port already in use by name.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the port is already in use (set http.addr or ASTRABOX_HTTP_ADDR to another)", addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves on ln until ctx is done, then shuts down gracefully within
// shutdownTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener, shutdownTimeout time.Duration) error {
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down http: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}
