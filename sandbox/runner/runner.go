// Package runner is the control service inside every box (run by
// cmd/astrabox-runner). It starts the Agent program and other processes with
// pipes, journals every output line with its offset on disk, takes stdin writes
// idempotently, serves replay and live follow, relays the box's loopback ports to
// the platform and forwards declared loopback ports to the host's egress sockets.
// It outlives the worker that talks to it: a restarted worker reconnects and
// continues from its offset.
package runner

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/buildinfo"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// maxLine bounds one journal record; longer lines are split.
const maxLine = runnerapi.MaxLine

// Runner is the in-box control service.
type Runner struct {
	cfg     runnerapi.Config
	acct    account
	info    runnerapi.Info
	logger  *log.Logger
	retry   time.Duration
	mu      sync.Mutex
	procs   map[string]*process
	terms   map[string]*terminal
	tunnel  *tunnelHub
	stop    chan struct{}
	stopped sync.Once
}

// New prepares a runner; Serve starts it.
func New(cfg runnerapi.Config, logger *log.Logger) (*Runner, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = runnerapi.ControlDir
	}
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(cfg.StateDir, runnerapi.SocketName)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "/"
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("boot id: %w", err)
	}
	info := runnerapi.Info{BootID: hex.EncodeToString(raw[:]), StartedAt: time.Now().UTC(),
		PID: os.Getpid(), UID: os.Getuid(), Build: buildinfo.Build()}
	if cfg.ProgramUID < 0 || cfg.ProgramGID < 0 || (cfg.ProgramUID > 0) != (cfg.ProgramGID > 0) {
		return nil, fmt.Errorf("program account %d:%d: set both or neither", cfg.ProgramUID, cfg.ProgramGID)
	}
	return &Runner{cfg: cfg, acct: account{uid: cfg.ProgramUID, gid: cfg.ProgramGID}, info: info, logger: logger, retry: 200 * time.Millisecond,
		procs: map[string]*process{}, terms: map[string]*terminal{}, tunnel: newTunnelHub(logger), stop: make(chan struct{})}, nil
}

// Serve binds the forwards and the control socket, reports readiness on ready
// (closed when listening, may be nil) and serves until ctx ends or a shutdown
// is requested. Forward listeners exist before any process starts, so programs
// never race their model connection.
func (r *Runner) Serve(ctx context.Context, ready func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, f := range r.cfg.Forwards {
		ln, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("forward %s: %w", f.Listen, err)
		}
		go serveForward(ctx, ln, f.Socket, r.logger)
	}
	for _, f := range r.cfg.Tunnels {
		ln, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("tunnelled forward %s %s: %w", f.Name, f.Listen, err)
		}
		go r.tunnel.serveTunnel(ctx, ln, f.Name)
	}
	defer r.tunnel.close()
	bootDir := filepath.Join(r.cfg.StateDir, "boots", r.info.BootID)
	if err := os.MkdirAll(bootDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	_ = os.Remove(r.cfg.Socket)
	ln, err := net.Listen("unix", r.cfg.Socket)
	if err != nil {
		return fmt.Errorf("listen %s: %w", r.cfg.Socket, err)
	}
	if err := os.Chmod(r.cfg.Socket, 0o600); err != nil {
		return fmt.Errorf("chmod socket: %w", err)
	}
	srv := &http.Server{Handler: r.authorize(r.routes()), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if r.cfg.ListenTCP != "" {
		if r.cfg.Token == "" {
			return fmt.Errorf("listen_tcp %s needs a token", r.cfg.ListenTCP)
		}
		tcp, err := net.Listen("tcp", r.cfg.ListenTCP)
		if err != nil {
			return fmt.Errorf("listen %s: %w", r.cfg.ListenTCP, err)
		}
		go func() { errc <- srv.Serve(tcp) }()
	}
	if ready != nil {
		ready()
	}
	r.logger.Printf("runner %s serving on %s", r.info.BootID, r.cfg.Socket)
	select {
	case <-ctx.Done():
	case <-r.stop:
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	shutdownCtx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	_ = srv.Shutdown(shutdownCtx)
	return nil
}

// authorize requires the configured token on every request, in TokenHeader or
// as an Authorization bearer token.
func (r *Runner) authorize(next http.Handler) http.Handler {
	if r.cfg.Token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got := req.Header.Get(runnerapi.TokenHeader)
		if got == "" {
			got, _ = strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(r.cfg.Token)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(runnerapi.ErrorBody{Code: "UNAUTHORIZED", Message: "missing or wrong runner token"})
			return
		}
		next.ServeHTTP(w, req)
	})
}

func (r *Runner) bootDir() string { return filepath.Join(r.cfg.StateDir, "boots", r.info.BootID) }

func (r *Runner) start(spec sandbox.ProcessSpec) (sandbox.ProcessStatus, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.ProcessStatus{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.procs[spec.ID]; ok {
		st := p.status()
		st.Existed = true
		return st, nil
	}
	env := envList(r.cfg.Env, spec.Env)
	p, err := startProcess(spec, filepath.Join(r.bootDir(), "proc", spec.ID), env, r.cfg.Workspace, r.acct, r.retry)
	if err != nil {
		return sandbox.ProcessStatus{}, err
	}
	r.procs[spec.ID] = p
	if spec.EndsBox {
		go r.endBoxAfter(p)
	}
	return p.status(), nil
}

// endBoxAfter ends the box once p exits and its output is journaled, leaving a
// death note the backend reports as the reason.
func (r *Runner) endBoxAfter(p *process) {
	<-p.exited
	p.readers.Wait()
	st := p.status()
	note := runnerapi.Death{Reason: "program_exited", At: time.Now().UTC(),
		Message: fmt.Sprintf("process %q exited with code %d %s", p.spec.ID, st.Exit.Code, st.Exit.Signal)}
	raw, _ := json.Marshal(note)
	if err := os.WriteFile(filepath.Join(r.cfg.StateDir, runnerapi.DeathName), raw, 0o600); err != nil {
		r.logger.Printf("write death note: %v", err)
	}
	r.shutdown(2 * time.Second)
}

func (r *Runner) process(id string) (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[id]
	if !ok {
		return nil, fmt.Errorf("process %q: %w", id, sandbox.ErrNoProcess)
	}
	return p, nil
}

func (r *Runner) list() []sandbox.ProcessStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sandbox.ProcessStatus, 0, len(r.procs))
	for _, p := range r.procs {
		out = append(out, p.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// shutdown terminates every process (SIGTERM, then SIGKILL after grace) and
// stops serving, which ends the runner and with it the box.
func (r *Runner) shutdown(grace time.Duration) {
	r.stopped.Do(func() {
		r.mu.Lock()
		procs := make([]*process, 0, len(r.procs))
		for _, p := range r.procs {
			procs = append(procs, p)
		}
		terms := make([]*terminal, 0, len(r.terms))
		for _, t := range r.terms {
			terms = append(terms, t)
		}
		r.mu.Unlock()
		for _, t := range terms {
			t.close(grace)
		}
		for _, p := range procs {
			_ = p.signal(syscall.SIGTERM, true)
		}
		deadline := time.NewTimer(grace)
		defer deadline.Stop()
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-deadline.C:
				for _, q := range procs {
					_ = q.signal(syscall.SIGKILL, true)
				}
				<-p.exited
			}
		}
		close(r.stop)
	})
}

// Info returns the runner's identity.
func (r *Runner) Info() runnerapi.Info { return r.info }

func errorStatus(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrNoProcess), errors.Is(err, os.ErrNotExist), errors.Is(err, sandbox.ErrNoFile):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrInvalidPath), errors.Is(err, sandbox.ErrIsFolder), errors.Is(err, sandbox.ErrNotFolder):
		return http.StatusBadRequest
	case errors.Is(err, sandbox.ErrProcessExited), errors.Is(err, sandbox.ErrStdinClosed):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return http.StatusBadRequest
	case errors.Is(err, sandbox.ErrJournalFailing):
		return http.StatusInsufficientStorage
	case errors.Is(err, sandbox.ErrOutputReleased):
		return http.StatusGone
	}
	return http.StatusInternalServerError
}
