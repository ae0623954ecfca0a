package osbfake

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/freeport"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// LocalBoxes runs each sandbox as a real box of a local backend, with the
// entry point's runner as a process in it, as a container runtime runs an
// image: the box has the workspace at the path the request names, Image's
// folders in place of the image's content, and shares the host's network so
// that the runner's port is the endpoint (the only mapping: a free loopback
// port for the requested one). The runner runs as the box's program account,
// so it starts programs as itself (no second account inside, unlike an image).
type LocalBoxes struct {
	Backend sandbox.Backend
	// Runner is the host path of the astrabox-runner binary.
	Runner string
	// Image are folders shown in the box as the image's content.
	Image []sandbox.Mount
}

const runnerMount = "/opt/astrabox-runner"

// Start implements Runtime.
func (l LocalBoxes) Start(_ string, req CreateRequest) (Box, error) {
	args, port, err := entrypointArgs(req.Entrypoint)
	if err != nil {
		return nil, err
	}
	hostPort, err := freeport.Reserve()
	if err != nil {
		return nil, err
	}
	args = append([]string{filepath.Join(runnerMount, filepath.Base(l.Runner))}, args...)
	for i, a := range args {
		if a == "-listen" {
			args[i+1] = fmt.Sprintf("127.0.0.1:%d", hostPort)
		}
	}
	boxEnv, runnerEnv := map[string]string{}, map[string]string{}
	for k, v := range req.Env {
		if strings.HasPrefix(k, runnerapi.EnvPrefix) {
			runnerEnv[k] = v
		} else {
			boxEnv[k] = v
		}
	}
	// The box already runs everything as its program account; the runner's
	// state goes to the box's private /tmp.
	delete(runnerEnv, runnerapi.EnvProgramUID)
	delete(runnerEnv, runnerapi.EnvProgramGID)
	runnerEnv[runnerapi.EnvStateDir] = "/tmp/astrabox-runner"
	spec := sandbox.Spec{Env: boxEnv, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost},
		Mounts:    append([]sandbox.Mount{{Source: filepath.Dir(l.Runner), Target: runnerMount}}, l.Image...),
		Workspace: sandbox.Workspace{MountPath: runnerEnv[runnerapi.EnvWorkspace]}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := l.Backend.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("local box: %w", err)
	}
	defer h.Close()
	deaths, err := l.Backend.Watch(context.Background(), h.ID())
	if err == nil {
		_, err = h.StartProcess(ctx, sandbox.ProcessSpec{ID: "entrypoint", Argv: args, Env: runnerEnv, EndsBox: true})
	}
	if err != nil {
		_ = l.Backend.Destroy(ctx, h.ID())
		return nil, fmt.Errorf("start the entry point in local box %s: %w", h.ID(), err)
	}
	b := &localBox{l: l, id: h.ID(), port: port, addr: fmt.Sprintf("127.0.0.1:%d", hostPort), exited: make(chan struct{})}
	go func() {
		d, ok := <-deaths
		if ok && d.Reason == "program_exited" && strings.Contains(d.Message, "code 0 ") {
			b.code = 0
		} else {
			b.code = 1
		}
		close(b.exited)
	}()
	return b, nil
}

// entrypointArgs checks that the entry point is the runner's network mode and
// returns its arguments and the port it asks for.
func entrypointArgs(entrypoint []string) ([]string, int, error) {
	if len(entrypoint) < 4 || entrypoint[1] != "serve" {
		return nil, 0, fmt.Errorf("entry point %q is not astrabox-runner serve -listen ADDR", entrypoint)
	}
	args := append([]string(nil), entrypoint[1:]...)
	for i, a := range args {
		if a == "-listen" && i+1 < len(args) {
			var port int
			if _, err := fmt.Sscanf(args[i+1][strings.LastIndexByte(args[i+1], ':')+1:], "%d", &port); err != nil {
				return nil, 0, fmt.Errorf("entry point listen address %q: %w", args[i+1], err)
			}
			return args, port, nil
		}
	}
	return nil, 0, fmt.Errorf("entry point %q has no -listen", entrypoint)
}

type localBox struct {
	l      LocalBoxes
	id     string
	port   int
	addr   string
	exited chan struct{}
	code   int
	stop   sync.Once
}

func (b *localBox) Endpoint(port int) (string, bool) {
	if port != b.port {
		return "", false
	}
	return b.addr, true
}

func (b *localBox) Exited() <-chan struct{} { return b.exited }
func (b *localBox) ExitCode() int           { return b.code }

func (b *localBox) Pause() error  { return b.l.Backend.Pause(context.Background(), b.id) }
func (b *localBox) Resume() error { return b.l.Backend.Resume(context.Background(), b.id) }

func (b *localBox) Stop() error {
	var err error
	b.stop.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = b.l.Backend.Destroy(ctx, b.id)
	})
	return err
}
