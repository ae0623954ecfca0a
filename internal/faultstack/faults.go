package faultstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/internal/pgcluster"
)

// The processes and services a fault can hit.
const (
	FaultWorker   = "worker"
	FaultAPI      = "api"
	FaultBox      = "box"
	FaultPostgres = "postgres"
	FaultTemporal = "temporal"
)

// StartPlatform starts `astrabox serve` and `astrabox worker` and waits until
// the API reports ready (database and Temporal reachable).
func (s *Stack) StartPlatform(ctx context.Context) error {
	if err := s.StartWorker(); err != nil {
		return err
	}
	return s.StartAPI(ctx)
}

// RestartPlatform SIGKILLs serve and worker together, as a host crash would,
// and starts them again.
func (s *Stack) RestartPlatform(ctx context.Context) error {
	if err := s.KillAPI(ctx); err != nil {
		return err
	}
	if err := s.KillWorker(ctx); err != nil {
		return err
	}
	return s.StartPlatform(ctx)
}

// StartWorker starts a worker process. It does not wait for it: a worker has
// no endpoint, and the Sessions it serves show when it works.
func (s *Stack) StartWorker() error {
	c, err := s.startRole("worker")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.worker = c
	s.mu.Unlock()
	return nil
}

// KillWorker SIGKILLs the worker. Its boxes keep running, as in production.
func (s *Stack) KillWorker(ctx context.Context) error {
	return s.killRole(ctx, &s.worker)
}

// StopWorker asks the worker to stop (SIGTERM), as a deployment's rollout does, and
// waits until it exited; its boxes keep running.
func (s *Stack) StopWorker(ctx context.Context) error {
	s.mu.Lock()
	c := s.worker
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.stop(ctx)
}

// WorkerPIDs returns the process id of each worker process the stack runs, by its
// name in the logs ("worker", or the name StartExtra gave it). A worker's host task
// queue names its pid, so a caller can tell which worker holds a Session.
func (s *Stack) WorkerPIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := map[string]int{}
	for _, c := range append([]*child{s.worker}, s.extras...) {
		if c != nil && c.role == "worker" {
			pids[c.name] = c.pid()
		}
	}
	return pids
}

// Kill SIGKILLs the platform process named name ("serve", "worker", or a name
// StartExtra gave), as a crash would; a worker's boxes keep running.
func (s *Stack) Kill(ctx context.Context, name string) error {
	c, err := s.named(name)
	if err != nil {
		return err
	}
	return c.kill(ctx)
}

// Stop asks the platform process named name to stop (SIGTERM), as a rollout does, and
// waits until it exited; a worker's boxes keep running.
func (s *Stack) Stop(ctx context.Context, name string) error {
	c, err := s.named(name)
	if err != nil {
		return err
	}
	return c.stop(ctx)
}

// named is the platform process named name.
func (s *Stack) named(name string) (*child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range append([]*child{s.api, s.worker}, s.extras...) {
		if c != nil && c.name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("faultstack: no process named %q", name)
}

// RestartWorker SIGKILLs the worker and starts a new one.
func (s *Stack) RestartWorker(ctx context.Context) error {
	if err := s.KillWorker(ctx); err != nil {
		return err
	}
	return s.StartWorker()
}

// StartAPI starts an API process and waits until /readyz answers 200.
func (s *Stack) StartAPI(ctx context.Context) error {
	c, err := s.startRole("serve")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.api = c
	s.mu.Unlock()
	return s.WaitReady(ctx)
}

// KillAPI SIGKILLs the API, cutting every open stream.
func (s *Stack) KillAPI(ctx context.Context) error {
	return s.killRole(ctx, &s.api)
}

// RestartAPI SIGKILLs the API and starts a new one.
func (s *Stack) RestartAPI(ctx context.Context) error {
	if err := s.KillAPI(ctx); err != nil {
		return err
	}
	return s.StartAPI(ctx)
}

func (s *Stack) killRole(ctx context.Context, slot **child) error {
	s.mu.Lock()
	c := *slot
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.kill(ctx)
}

// RestartTemporal SIGKILLs the Temporal dev server and starts it again on the
// same database file.
func (s *Stack) RestartTemporal(ctx context.Context) error {
	s.mu.Lock()
	c := s.temporal
	s.mu.Unlock()
	if err := c.kill(ctx); err != nil {
		return err
	}
	return s.startTemporal(ctx)
}

// RestartPostgres stops the cluster (fast shutdown: connections are cut, open
// transactions roll back) and starts it again on the same data.
func (s *Stack) RestartPostgres(ctx context.Context) error {
	if err := s.StopPostgres(ctx); err != nil {
		return err
	}
	return s.StartPostgres(ctx)
}

// WaitReady polls /readyz until it answers 200, failing at once if the API
// process exits.
func (s *Stack) WaitReady(ctx context.Context) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", s.apiPort)
	return poll(ctx, 200*time.Millisecond, url+" to answer 200", func() (bool, error) {
		s.mu.Lock()
		api := s.api
		s.mu.Unlock()
		if api != nil {
			if err := api.exitedUnexpectedly(); err != nil {
				return false, err
			}
		}
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// boxRecord is the part of the local backend's box.json (sandbox/local
// layout.go) the harness needs to kill a box from outside, as an operator or
// the kernel's OOM killer would.
type boxRecord struct {
	ID       string `json:"id"`
	BwrapPID int    `json:"bwrap_pid"`
	InitPID  int    `json:"init_pid"`
}

// SessionBox returns the id of the box the Session's runtime is placed in.
func (s *Stack) SessionBox(ctx context.Context, sessionID string) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return "", fmt.Errorf("connect to look up the box: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var box *string
	if err := conn.QueryRow(ctx, "SELECT sandbox_id FROM sessions WHERE id = $1", sessionID).Scan(&box); err != nil {
		return "", fmt.Errorf("look up the box of session %s: %w", sessionID, err)
	}
	if box == nil {
		return "", fmt.Errorf("session %s has no box", sessionID)
	}
	return *box, nil
}

// KillBox SIGKILLs the init process of the Session's box, which ends every
// process in it, and its outer bubblewrap. It returns the box's id.
func (s *Stack) KillBox(ctx context.Context, sessionID string) (string, error) {
	id, err := s.SessionBox(ctx, sessionID)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(s.stateDir, "boxes", id, "box.json"))
	if err != nil {
		return "", fmt.Errorf("read the record of box %s: %w", id, err)
	}
	var rec boxRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", fmt.Errorf("decode the record of box %s: %w", id, err)
	}
	if rec.InitPID <= 0 || rec.BwrapPID <= 0 {
		return "", fmt.Errorf("box %s records no processes: %s", id, raw)
	}
	for _, pid := range []int{rec.InitPID, rec.BwrapPID} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return "", fmt.Errorf("kill pid %d of box %s: %w", pid, id, err)
		}
	}
	err = poll(ctx, 50*time.Millisecond, "box "+id+" to die", func() (bool, error) {
		return !processAlive(rec.BwrapPID, "bwrap"), nil
	})
	return id, err
}

// processAlive reports whether pid runs a program whose name starts with comm.
func processAlive(pid int, comm string) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	if err != nil {
		return false
	}
	// A zombie has exited; its parent has only not reaped it yet.
	fields := strings.Fields(string(raw))
	if len(fields) > 2 && fields[2] == "Z" {
		return false
	}
	return strings.Contains(string(raw), "("+comm)
}

// StopPostgres stops the cluster (fast shutdown) and leaves it down until
// StartPostgres.
func (s *Stack) StopPostgres(ctx context.Context) error {
	return s.cluster().Stop(ctx)
}

// StartPostgres starts the cluster again on the same data and port.
func (s *Stack) StartPostgres(ctx context.Context) error {
	restarted, err := pgcluster.Start(ctx, s.pgOpts)
	if err != nil {
		return fmt.Errorf("restart postgresql: %w", err)
	}
	s.mu.Lock()
	s.pg = restarted
	s.mu.Unlock()
	return nil
}

// Heal starts again every process of the stack that is not running (one that
// crashed on its own, or was killed and not restarted), so one failed fault
// does not break the faults after it. It returns what it restarted.
func (s *Stack) Heal(ctx context.Context) ([]string, error) {
	var healed []string
	s.mu.Lock()
	temporal, api, worker := s.temporal, s.api, s.worker
	s.mu.Unlock()
	if !running(temporal) {
		healed = append(healed, "temporal")
		if err := s.startTemporal(ctx); err != nil {
			return healed, err
		}
	}
	if !running(worker) {
		healed = append(healed, "worker")
		if err := s.StartWorker(); err != nil {
			return healed, err
		}
	}
	if !running(api) {
		healed = append(healed, "api")
		if err := s.StartAPI(ctx); err != nil {
			return healed, err
		}
	}
	return healed, s.WaitReady(ctx)
}

func running(c *child) bool {
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}
