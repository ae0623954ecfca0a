package temporaldev

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The dev server keeps its SQLite store on one connection. When a request is
// cancelled while its statement runs, the store interrupts the connection
// (sqlite3_interrupt), and the SQLite build in the pinned CLI can leave that
// interruption standing: from then on every statement fails with
// SQLITE_INTERRUPT, the server answers every call with "interrupted (9)" or
// "Namespace default is not found", and it never recovers on its own. Nothing
// is lost in the file, so the cure is a restart on the same database, which the
// watch does once a few probes in a row find the store so.

// sqliteInterrupted is how the server's errors name SQLITE_INTERRUPT.
const sqliteInterrupted = "interrupted (9)"

// Health watch defaults: a probe every two seconds, three interrupted probes in
// a row (a single one may be another request's interruption reaching the
// probe's statement) before a restart.
const (
	defaultProbeEvery    = 2 * time.Second
	defaultProbeFailures = 3
	defaultProbeTimeout  = 5 * time.Second
)

// HealthPolicy is how the server's store is watched.
type HealthPolicy struct {
	// Every is the time between probes.
	Every time.Duration
	// Failures is how many probes in a row must find the store interrupted.
	Failures int
	// Timeout bounds one probe.
	Timeout time.Duration

	// probe replaces the frontend call, for tests.
	probe func(context.Context) error
}

func (p HealthPolicy) withDefaults() HealthPolicy {
	if p.Every <= 0 {
		p.Every = defaultProbeEvery
	}
	if p.Failures <= 0 {
		p.Failures = defaultProbeFailures
	}
	if p.Timeout <= 0 {
		p.Timeout = defaultProbeTimeout
	}
	return p
}

// storeProbe reads the default namespace through the frontend, a call that
// reads the store.
type storeProbe struct {
	conn  *grpc.ClientConn
	check func(context.Context) error
}

func newStoreProbe(port int, replaced func(context.Context) error) (*storeProbe, error) {
	if replaced != nil {
		return &storeProbe{check: replaced}, nil
	}
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("temporal dev server probe: %w", err)
	}
	svc := workflowservice.NewWorkflowServiceClient(conn)
	return &storeProbe{conn: conn, check: func(ctx context.Context) error {
		_, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err
	}}, nil
}

func (p *storeProbe) close() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
}

// storeInterrupted reports whether err is the store's standing interruption.
func storeInterrupted(err error) bool {
	return err != nil && strings.Contains(err.Error(), sqliteInterrupted)
}

// watchStore probes the store until Stop or the supervisor gives up, and kills
// the server (which the supervisor then restarts) once the policy's number of
// probes in a row found it interrupted.
func (s *Server) watchStore(p *storeProbe) {
	policy := s.opts.Health.withDefaults()
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-base.Done():
		}
	}()
	tick := time.NewTicker(policy.Every)
	defer tick.Stop()
	interrupted := 0
	for {
		select {
		case <-s.stopping:
			return
		case <-s.failed:
			return
		case <-tick.C:
		}
		ctx, cancelProbe := context.WithTimeout(base, policy.Timeout)
		err := p.check(ctx)
		cancelProbe()
		if !storeInterrupted(err) {
			interrupted = 0
			continue
		}
		if interrupted++; interrupted < policy.Failures {
			continue
		}
		s.log.Warn("temporal dev server's store answers every statement as interrupted; restarting it on the same database",
			zap.Int("probes", interrupted), zap.Error(err))
		s.kill()
		interrupted = 0
	}
}

// WaitServing returns once the frontend answers a call that reads the store,
// or with an error when ctx ends or the supervisor gives up first.
func (s *Server) WaitServing(ctx context.Context) error {
	p, err := newStoreProbe(s.opts.Port, s.opts.Health.probe)
	if err != nil {
		return err
	}
	defer p.close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		probeCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := p.check(probeCtx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal dev server on port %d not serving: %w", s.opts.Port, errors.Join(ctx.Err(), err))
		case <-s.failed:
			return s.err
		case <-tick.C:
		}
	}
}
