package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/engines"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/egress"
	"github.com/astrabox/astrabox/sandbox/opensandbox"
	"github.com/astrabox/astrabox/store"
)

// sandboxOffers are the sandbox backends RuntimeProfiles may select in this
// deployment, with what each declares: the backend this deployment's workers
// run (sandbox.backend: local or kubernetes, both with process sessions, one
// conversation per box; a local box without an image runs on the host system),
// and the OpenSandbox backend when its URL is configured.
func sandboxOffers(cfg *config.Config) map[string]engines.SandboxBackendCapabilities {
	offers := map[string]engines.SandboxBackendCapabilities{cfg.Sandbox.Backend: {SupportsProcessSessions: true,
		RunsHostSystem: cfg.Sandbox.Backend == store.SandboxLocal}}
	if cfg.Sandbox.OpenSandbox.URL != "" {
		offers[store.SandboxOpenSandbox] = api.BackendOffer(opensandbox.DeclaredCapabilities(), true)
	}
	return offers
}

// openOpenSandbox builds the OpenSandbox backend from configuration; nil when
// none is configured. It does not call the server: an unreachable one fails
// the Sessions that need it, not the worker. Only workers (worker) renew boxes'
// expiry and serve their forwards through egress tunnels, with egressRoutes
// (the model services and their credentials); the API only reaches boxes.
func openOpenSandbox(cfg config.OpenSandbox, log *zap.Logger, worker bool, egressRoutes map[string]egress.Route) (*opensandbox.Backend, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSHandshakeTimeout = cfg.RequestTimeout
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("sandbox.opensandbox.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sandbox.opensandbox.ca_file: no PEM certificate in %s", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	b, err := opensandbox.New(opensandbox.Options{URL: cfg.URL, APIKey: cfg.APIKey.Reveal(), RunnerKey: []byte(cfg.RunnerKey.Reveal()),
		Deployment: cfg.Deployment, HTTPClient: &http.Client{Transport: tr}, Entrypoint: cfg.Entrypoint,
		RunnerPort: cfg.RunnerPort, RunnerScheme: cfg.RunnerScheme,
		UseServerProxy: cfg.UseServerProxy, ProgramUID: cfg.ProgramUID, ProgramGID: cfg.ProgramGID,
		ReadyTimeout: cfg.ReadyTimeout, RequestTimeout: cfg.RequestTimeout, Attempts: cfg.Attempts, NoRenewal: !worker,
		NoTunnels: !worker, Egress: egressRoutes, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("sandbox.opensandbox: %w", err)
	}
	return b, nil
}

// reapOpenSandboxOrphans runs when a worker starts: the deployment's boxes that
// no Session holds (a worker died between creating and placing one, or a
// Session was deleted while its worker was down) are deleted. Boxes younger
// than grace are kept, since another worker may be about to place them.
func reapOpenSandboxOrphans(ctx context.Context, st *store.Store, b *opensandbox.Backend, grace time.Duration, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	placed, err := st.ListPlacedSandboxIDs(ctx)
	if err != nil {
		log.Warn("reap orphan boxes: list placed boxes", zap.Error(err))
		return
	}
	keep := make(map[string]bool, len(placed))
	for _, id := range placed {
		keep[id] = true
	}
	all, err := b.List(ctx)
	if err != nil {
		log.Warn("reap orphan boxes: list boxes", zap.Error(err))
		return
	}
	for _, in := range all {
		if time.Since(in.CreatedAt) < grace {
			keep[in.ID] = true
		}
	}
	reaped, err := b.Reap(ctx, func(id string) bool { return keep[id] })
	if len(reaped) > 0 {
		log.Info("deleted boxes no Session holds", zap.Strings("boxes", reaped))
	}
	if err != nil {
		log.Warn("reap orphan boxes", zap.Error(err))
	}
}

// sessionBoxes finds a Session's box in whichever backend has it.
type sessionBoxes []sandbox.Backend

// Get returns the first backend's handle on id; ErrNotFound when none has it.
func (s sessionBoxes) Get(ctx context.Context, id string) (sandbox.Handle, error) {
	for _, b := range s {
		h, err := b.Get(ctx, id)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		return h, err
	}
	return nil, fmt.Errorf("box %q: %w", id, sandbox.ErrNotFound)
}
