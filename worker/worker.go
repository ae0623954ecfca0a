// Package worker runs AstraBox's Temporal workers in one process: a worker on the
// shared task queue (work any worker may do, such as preparing a sandbox) and a
// worker on this process's own host task queue (work that must reach a live
// runtime connection this process holds). Host affinity is a task queue per
// worker process, as in Temporal's worker-specific task queue pattern.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// hostHeartbeatThrottle bounds how long a host activity's cancellation may wait.
const hostHeartbeatThrottle = 2 * time.Second

// Registrar registers workflows and activities on a Temporal worker.
type Registrar func(worker.Registry)

// Options configures the workers of one process.
type Options struct {
	// SharedTaskQueue is the queue every worker polls.
	SharedTaskQueue string
	// HostID names this process; empty derives one from the hostname, pid and a
	// random suffix so a restarted process never polls its predecessor's queue.
	HostID string
	// Shared registers workflows and activities on the shared queue.
	Shared []Registrar
	// Host registers activities that need this process's live connections.
	Host []Registrar
	// WorkflowCacheSize, when positive, bounds the workflows the process keeps in
	// memory between their tasks (the SDK's sticky cache, evicting the least recently
	// used; a workflow evicted is replayed from its history at its next task). Zero
	// keeps the SDK's default of 10,000.
	WorkflowCacheSize int
	Logger            *zap.Logger
	// Interceptors wrap every workflow and activity of both workers (metrics).
	Interceptors []interceptor.WorkerInterceptor
	// Version, when set, opts the shared worker into Worker Deployment Versioning.
	// The host worker stays unversioned: its queue belongs to this one process, so it
	// only ever sees this build, and a versioned host queue would leave a workflow on
	// a newer version unable to reach a Relay an older process still holds.
	Version *Version
}

// Version is the Worker Deployment Version a process's shared worker polls as.
// Temporal routes each workflow task only to workers of the version the workflow
// runs on, so during a rolling upgrade old and new builds never take turns on one
// execution.
type Version struct {
	DeploymentName string
	BuildID        string
	// Behavior is what workflows started on this version do when another version
	// becomes current: AutoUpgrade moves them at their next workflow task (the code
	// must replay their history), Pinned keeps them on this build until they end.
	Behavior workflow.VersioningBehavior
}

func (v *Version) deploymentOptions() worker.DeploymentOptions {
	if v == nil {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: v.DeploymentName, BuildID: v.BuildID},
		DefaultVersioningBehavior: v.Behavior,
	}
}

// Worker is the pair of Temporal workers of one process.
type Worker struct {
	shared        worker.Worker
	host          worker.Worker
	hostTaskQueue string
	log           *zap.Logger
	// fatal receives the error with which the SDK stopped a worker on its own.
	fatal chan error
}

// HostTaskQueue returns the host task queue of hostID under a shared queue.
func HostTaskQueue(shared, hostID string) string { return shared + "/host/" + hostID }

// New builds the workers; Run starts them.
func New(c client.Client, opts Options) (*Worker, error) {
	if opts.SharedTaskQueue == "" {
		return nil, fmt.Errorf("worker: shared task queue is required")
	}
	hostID := opts.HostID
	if hostID == "" {
		hostID = newHostID()
	}
	if opts.WorkflowCacheSize > 0 {
		// The SDK keeps one cache per process, sized before its first worker starts.
		worker.SetStickyWorkflowCacheSize(opts.WorkflowCacheSize)
	}
	w := &Worker{
		hostTaskQueue: HostTaskQueue(opts.SharedTaskQueue, hostID),
		log:           opts.Logger,
		fatal:         make(chan error, 2),
	}
	// The SDK's pollers retry an unreachable frontend for ever (a Temporal outage is
	// ridden out), but stop the worker on errors no retry cures, such as an unknown
	// namespace. Run then returns, so the process ends instead of idling unpolled.
	onFatal := func(err error) {
		select {
		case w.fatal <- err:
		default:
		}
	}
	if opts.Version != nil && (opts.Version.DeploymentName == "" || opts.Version.BuildID == "") {
		return nil, fmt.Errorf("worker: a deployment version needs a deployment name and a build id")
	}
	w.shared = worker.New(c, opts.SharedTaskQueue, worker.Options{
		OnFatalError:      onFatal,
		Interceptors:      opts.Interceptors,
		DeploymentOptions: opts.Version.deploymentOptions(),
	})
	// The server delivers a cancellation only in a heartbeat's reply, so host
	// activities send heartbeats at most hostHeartbeatThrottle apart instead of the
	// SDK's 80% of the timeout. A Relay heartbeats seldom (every 30 s) and is stopped
	// through StopRelay on this queue instead.
	w.host = worker.New(c, w.hostTaskQueue, worker.Options{
		MaxHeartbeatThrottleInterval:     hostHeartbeatThrottle,
		DefaultHeartbeatThrottleInterval: hostHeartbeatThrottle,
		OnFatalError:                     onFatal,
		Interceptors:                     opts.Interceptors,
	})
	for _, r := range opts.Shared {
		r(w.shared)
	}
	for _, r := range opts.Host {
		r(w.host)
	}
	return w, nil
}

// HostTaskQueue is this process's own task queue.
func (w *Worker) HostTaskQueue() string { return w.hostTaskQueue }

// Run starts both workers and blocks until ctx is done, then stops them. It
// returns early with the error when the SDK stopped a worker on a fatal error.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.shared.Start(); err != nil {
		return fmt.Errorf("start shared worker: %w", err)
	}
	if err := w.host.Start(); err != nil {
		w.shared.Stop()
		return fmt.Errorf("start host worker: %w", err)
	}
	w.log.Info("temporal workers started", zap.String("host_task_queue", w.hostTaskQueue))
	var err error
	select {
	case <-ctx.Done():
	case fatal := <-w.fatal:
		err = fmt.Errorf("temporal worker stopped: %w", fatal)
	}
	w.host.Stop()
	w.shared.Stop()
	return err
}

// NewHostID returns a host id unique to this process: hostname, pid and a random
// suffix. Pass it as Options.HostID when something built before the workers (the
// activities) must know the host task queue.
func NewHostID() string { return newHostID() }

func newHostID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
