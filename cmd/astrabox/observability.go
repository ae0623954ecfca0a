package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/buildinfo"
	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/worker"
)

// serveWorkerMetrics serves the process's registry at /metrics, and the worker's
// /healthz and /readyz, on metrics.listen until ctx is done.
func (p *platform) serveWorkerMetrics(ctx context.Context) error {
	ln, err := net.Listen("tcp", p.cfg.Metrics.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen %s: %w", p.cfg.Metrics.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", p.tel.Metrics.Handler())
	// The worker serves no API, so its liveness and readiness probes (the API's own
	// answers) live beside its metrics for the orchestrator.
	api.RegisterProbes(mux, p.checks(), p.log.Named("probes"))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	p.log.Info("worker metrics listening", zap.String("addr", ln.Addr().String()))
	select {
	case err := <-errc:
		return fmt.Errorf("serve worker metrics: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down worker metrics: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve worker metrics: %w", err)
	}
	return nil
}

// workerVersion is the Worker Deployment Version the workers poll as, or nil when
// temporal.versioning is off. An empty build id takes the binary's build.
func workerVersion(v config.Versioning) *worker.Version {
	if !v.Enabled {
		return nil
	}
	build := v.BuildID
	if build == "" {
		build = buildinfo.Build()
	}
	behavior := workflow.VersioningBehaviorAutoUpgrade
	if v.Behavior == config.VersioningPinned {
		behavior = workflow.VersioningBehaviorPinned
	}
	return &worker.Version{DeploymentName: v.DeploymentName, BuildID: build, Behavior: behavior}
}

// adoptFirstVersion makes this build the current version of a deployment that has
// none yet (its first rollout), so its workflows run without waiting for an operator;
// later builds are promoted with `astrabox temporal set-current-version`.
func (p *platform) adoptFirstVersion(ctx context.Context, v *worker.Version) error {
	made, err := temporalconn.EnsureCurrentVersion(ctx, p.temporal, v.DeploymentName, v.BuildID)
	if err != nil {
		return err
	}
	if made {
		p.log.Info("first version of the worker deployment made current", zap.String("deployment", v.DeploymentName), zap.String("build_id", v.BuildID))
	} else {
		p.log.Info("worker deployment has a current version; this build gets workflow tasks once promoted (astrabox temporal set-current-version)",
			zap.String("deployment", v.DeploymentName), zap.String("build_id", v.BuildID))
	}
	return nil
}
