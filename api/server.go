// Package api is AstraBox's HTTP surface on Gin: the public REST API under
// /api/v1, the health routes, request ids and access logs, and the one mapper
// that turns errors into the product's {code, message, data} envelope.
package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/internal/telemetry"
)

// Options configures a Server. The health routes need only Logger; the public API
// under /api/v1 is served when Store is set.
type Options struct {
	Logger *zap.Logger
	// Checks are the dependencies /readyz reports on.
	Checks []Check
	// ErrorMappers translate domain errors into envelopes. An unreachable database or
	// Temporal is always mapped first (503), the store's and the engine registry's
	// errors after these.
	ErrorMappers []ErrorMapper

	// Store is the database (*store.Store); nil serves only the health routes.
	Store Store
	// Output wakes stream followers when parts are committed, and when a token or share
	// link is revoked or a user disabled (store/pubsub).
	Output OutputSubscriber
	// Signaler hands work to each Session's workflow after its row is written.
	Signaler SessionSignaler
	// Registry holds the installed engine adapters Agents and RuntimeProfiles are
	// validated against.
	Registry *engines.Registry
	// SandboxBackends are the capabilities of the sandbox backends a RuntimeProfile may
	// select, by name; nil means DefaultSandboxBackends.
	SandboxBackends map[string]engines.SandboxBackendCapabilities
	// Admission decides whether a Session takes one more input; nil admits up to
	// MaxHeldInputs held inputs.
	Admission AdmissionPolicy
	// MaxHeldInputs caps the inputs a Session may hold for the default admission
	// policy; zero means no cap.
	MaxHeldInputs int
	// MaxLiveBoxesPerUser caps the Sessions with a live box one user may hold
	// (sandbox.max_live_boxes_per_user); a create beyond it is refused with 429
	// ADMISSION_DENIED. Zero means no cap.
	MaxLiveBoxesPerUser int
	// MaxInputBytes caps one message's content (http.max_input_bytes); zero means 256 KiB.
	MaxInputBytes int
	// MaxBodyBytes caps a request body other than a message's and a history import's
	// (http.max_body_bytes); zero means 1 MiB.
	MaxBodyBytes int
	// ReadTimeout bounds reading a whole request, body included (http.read_timeout);
	// zero means 30 s. Streams lift it once their request is read.
	ReadTimeout time.Duration
	// IdleTimeout closes a kept-alive connection without a next request
	// (http.idle_timeout); zero means 2 min.
	IdleTimeout time.Duration
	// MaxStreamsPerToken caps the streams one API token holds open on this server
	// (http.max_streams_per_token); zero means 16.
	MaxStreamsPerToken int
	// TokenRecheck is how often an open stream re-checks its token and ends once it is
	// revoked or expired (http.token_recheck_interval); zero means 30 s.
	TokenRecheck time.Duration
	// TokenCacheTTL is how long an authenticated token and its user are kept in memory
	// without reading them again (http.token_cache_ttl); zero reads them at every
	// request. A revocation or a disabled user empties the cache when announced.
	TokenCacheTTL time.Duration
	// KeepAlive is the idle interval after which a stream sends a comment; zero means 15 s.
	KeepAlive time.Duration
	// Now is the clock for token expiry; nil means time.Now.
	Now func() time.Time
	// Boxes reaches Sessions' boxes for the workspace files API and the web
	// terminal; nil answers those routes 503 (an API process without sandboxes).
	Boxes SessionBoxes
	// MaxUploadBytes caps one workspace upload request; zero means 256 MiB.
	MaxUploadBytes int64
	// Telemetry holds the process's metrics, served at /metrics, and its tracer; nil
	// keeps metrics in a registry of the server's own and records no spans.
	Telemetry *telemetry.Telemetry

	// Console is the web console's built files, served at / and every GET path
	// outside /api/ that no route takes (index.html for the console's own paths);
	// nil serves none.
	Console fs.FS
}

const (
	// headerTimeout bounds reading a request's headers.
	headerTimeout = 10 * time.Second
	// maxHeaderBytes caps a request's headers; tokens and ids are short.
	maxHeaderBytes = 64 << 10
)

// Server owns the Gin engine and its routes.
type Server struct {
	log             *zap.Logger
	engine          *gin.Engine
	checks          []Check
	errorMappers    []ErrorMapper
	store           Store
	output          OutputSubscriber
	signaler        SessionSignaler
	registry        *engines.Registry
	sandboxBackends map[string]engines.SandboxBackendCapabilities
	admission       AdmissionPolicy
	maxLiveBoxes    int
	maxInputBytes   int
	maxBodyBytes    int64
	readTimeout     time.Duration
	idleTimeout     time.Duration
	tokenRecheck    time.Duration
	tokens          *tokenCache
	streams         *streamLimiter
	keepAlive       time.Duration
	now             func() time.Time
	// partReads shares reads of the output log among this process's streams.
	partReads partReads

	boxes          SessionBoxes
	maxUploadBytes int64

	metrics    *telemetry.Metrics
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	console    fs.FS
}

// New builds the server and its routes.
func New(opts Options) *Server {
	s := &Server{
		log:             opts.Logger,
		engine:          gin.New(),
		checks:          opts.Checks,
		errorMappers:    append(append([]ErrorMapper{unavailableErrors}, opts.ErrorMappers...), domainErrors),
		store:           opts.Store,
		output:          opts.Output,
		signaler:        opts.Signaler,
		registry:        opts.Registry,
		sandboxBackends: opts.SandboxBackends,
		admission:       opts.Admission,
		maxLiveBoxes:    opts.MaxLiveBoxesPerUser,
		maxInputBytes:   opts.MaxInputBytes,
		maxBodyBytes:    int64(opts.MaxBodyBytes),
		readTimeout:     opts.ReadTimeout,
		idleTimeout:     opts.IdleTimeout,
		tokenRecheck:    opts.TokenRecheck,
		tokens:          newTokenCache(opts.TokenCacheTTL, opts.Output),
		streams:         newStreamLimiter(opts.MaxStreamsPerToken),
		keepAlive:       opts.KeepAlive,
		now:             opts.Now,

		boxes:          opts.Boxes,
		maxUploadBytes: opts.MaxUploadBytes,
		console:        opts.Console,
	}
	tel := opts.Telemetry
	if tel == nil {
		tel = telemetry.NewWithTracer(nil, s.log)
	}
	s.metrics, s.tracer, s.propagator = tel.Metrics, tel.Tracer(), tel.Propagator()
	if s.maxUploadBytes <= 0 {
		s.maxUploadBytes = defaultMaxUploadBytes
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.registry == nil {
		s.registry = engines.NewRegistry()
	}
	if s.sandboxBackends == nil {
		s.sandboxBackends = DefaultSandboxBackends()
	}
	if s.maxInputBytes <= 0 {
		s.maxInputBytes = 256 << 10
	}
	if s.maxBodyBytes <= 0 {
		s.maxBodyBytes = 1 << 20
	}
	if s.readTimeout <= 0 {
		s.readTimeout = 30 * time.Second
	}
	if s.idleTimeout <= 0 {
		s.idleTimeout = 2 * time.Minute
	}
	if s.tokenRecheck <= 0 {
		s.tokenRecheck = 30 * time.Second
	}
	if s.keepAlive <= 0 {
		s.keepAlive = 15 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.admission == nil {
		s.admission = MaxHeldInputs{Limit: opts.MaxHeldInputs}
	}
	s.engine.HandleMethodNotAllowed = true
	s.engine.Use(s.requestContext, s.observe, s.recoverPanic)
	s.engine.NoRoute(func(c *gin.Context) {
		if s.serveConsole(c) {
			return
		}
		if refused, ok := viewerWriteRefused(c); ok {
			s.fail(c, refused)
			return
		}
		s.fail(c, NotFound("route "+pathForMessages(c.Request.URL.Path)))
	})
	s.engine.NoMethod(func(c *gin.Context) {
		if refused, ok := viewerWriteRefused(c); ok {
			s.fail(c, refused)
			return
		}
		s.fail(c, &Error{Status: http.StatusMethodNotAllowed, Code: CodeInvalidRequest, Message: "method " + c.Request.Method + " not allowed here"})
	})
	s.engine.GET("/healthz", s.healthz)
	s.engine.GET("/readyz", s.readyz)
	// Like the health routes, /metrics needs no token: keep it off the public ingress
	// (docs/observability.md).
	s.engine.GET("/metrics", gin.WrapH(s.metrics.Handler()))
	s.engine.GET("/openapi.json", s.openAPI)
	s.engine.GET("/docs", s.docs)
	if s.store != nil {
		s.routes(s.engine.Group("/api/v1", s.authenticate, s.checkRequestText))
		s.sharedRoutes(s.engine.Group("/api/v1", s.authenticateShare, s.checkRequestText))
	}
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
	// ReadTimeout also bounds the body, so a client trickling one holds its connection
	// no longer than that; streams, which read no body, lift it per request. There is
	// no WriteTimeout: it would cut streams, which end on their own terms.
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: min(headerTimeout, s.readTimeout),
		ReadTimeout:       s.readTimeout,
		IdleTimeout:       s.idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
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
