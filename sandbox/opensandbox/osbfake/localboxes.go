package osbfake

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// LocalBoxes runs each sandbox as a real box of a local backend, with the
// entry point's runner as a process in it, as a container runtime runs an
// image: the box has the workspace at the path the request names, Image's
// folders in place of the image's content, and a network of its own, as a
// container has: the runner listens on the requested port of the box's
// loopback, and the endpoint is a host loopback port mapped to it. (A box on
// the host's network would share its loopback: the runner's tunnelled forwards
// would then collide with whatever else on the host holds their ports.) The
// runner runs as the box's program account, so it starts programs as itself
// (no second account inside, unlike an image).
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
	args = append([]string{filepath.Join(runnerMount, filepath.Base(l.Runner))}, args...)
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
	spec := sandbox.Spec{Env: boxEnv, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkNone},
		Mounts:    append([]sandbox.Mount{{Source: filepath.Dir(l.Runner), Target: runnerMount}}, l.Image...),
		Workspace: sandbox.Workspace{MountPath: runnerEnv[runnerapi.EnvWorkspace]}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := l.Backend.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("local box: %w", err)
	}
	defer h.Close()
	b := &localBox{l: l, id: h.ID(), port: port, exited: make(chan struct{})}
	if err := b.start(ctx, h, args, runnerEnv); err != nil {
		_ = l.Backend.Destroy(ctx, h.ID())
		return nil, fmt.Errorf("start the entry point in local box %s: %w", h.ID(), err)
	}
	return b, nil
}

// start runs the entry point in the box, maps the endpoint's port into the
// box's network and notes the entry point's end.
func (b *localBox) start(ctx context.Context, h sandbox.Handle, args []string, env map[string]string) error {
	deaths, err := b.l.Backend.Watch(context.Background(), b.id)
	if err != nil {
		return err
	}
	info, err := h.Info(ctx)
	if err != nil {
		return err
	}
	st, err := h.StartProcess(ctx, sandbox.ProcessSpec{ID: "entrypoint", Argv: args, Env: env, EndsBox: true})
	if err != nil {
		return err
	}
	ns, err := boxNetwork(info.UID, st.PID)
	if err != nil {
		return err
	}
	if b.ports, err = mapPort(ns, b.port); err != nil {
		ns.Close()
		return err
	}
	go func() {
		d, ok := <-deaths
		if ok && d.Reason == "program_exited" && strings.Contains(d.Message, "code 0 ") {
			b.code = 0
		} else {
			b.code = 1
		}
		close(b.exited)
	}()
	return nil
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
	ports  *portMap
	exited chan struct{}
	code   int
	stop   sync.Once
}

func (b *localBox) Endpoint(port int) (string, bool) {
	if port != b.port {
		return "", false
	}
	return b.ports.Addr(), true
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
		err = errors.Join(b.l.Backend.Destroy(ctx, b.id), b.ports.Close())
	})
	return err
}
