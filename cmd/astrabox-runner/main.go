// Command astrabox-runner is the control service inside every AstraBox box
// (package sandbox/runner) and, on the host, the small launcher the local backend
// uses to place a new box in its cgroups and account before bubblewrap starts.
// It is built as a static binary (CGO_ENABLED=0) so it runs in any image. On the
// host it is also each box's egress forwarder, which outlives workers.
//
//	astrabox-runner serve -config /run/astrabox/runner.json [-ready-fd N]
//	astrabox-runner serve -listen :9494   (image entry point; settings from ASTRABOX_RUNNER_*)
//	astrabox-runner launch -uid U -runner-uid R [-fds N] [-cgroup DIR]... -- bwrap ARGS...
//	astrabox-runner egress [-ready-fd N] [-config FILE] < forwarder config (JSON)
//	astrabox-runner stdin-echo -- PROGRAM [ARGS...]   (in a box: journal what a JSON-RPC program is sent)
//	astrabox-runner health [-config /run/astrabox/runner.json]   (in a box: succeed once the runner answers)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/runner"
	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: astrabox-runner serve|launch|egress|stdin-echo|health ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "launch":
		err = launch(os.Args[2:])
	case "egress":
		err = forward(os.Args[2:])
	case "stdin-echo":
		err = stdinEcho(os.Args[2:])
	case "health":
		err = health(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want serve, launch, egress, stdin-echo or health)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "astrabox-runner:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", runnerapi.ControlDir+"/"+runnerapi.ConfigName, "boot configuration")
	readyFD := fs.Int("ready-fd", -1, "file descriptor to write \"ready\" to once serving")
	listen := fs.String("listen", "", "serve on this TCP address, configured from the environment (the image entry point of remote backends)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ready *os.File
	if *readyFD >= 0 {
		ready = os.NewFile(uintptr(*readyFD), "ready")
	}
	// Descriptors inherited from the launcher (bubblewrap's status fd, ...) must
	// not leak into the programs the runner starts.
	closeInheritedOnExec(*readyFD)
	var cfg runnerapi.Config
	if *listen != "" {
		var err error
		if cfg, err = networkConfig(*listen, os.Environ()); err != nil {
			return err
		}
		// The token and the runner's other settings must not reach any process
		// the runner starts, nor stay readable in its own environment.
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, runnerapi.EnvPrefix) {
				_ = os.Unsetenv(name)
			}
		}
	} else {
		raw, err := os.ReadFile(*configPath)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("parse config %s: %w", *configPath, err)
		}
	}
	logger := log.New(os.Stderr, "astrabox-runner: ", log.LstdFlags|log.LUTC)
	if cfg.ProgramUID > 0 {
		if err := clearInheritableCaps(); err != nil {
			logger.Printf("clear inheritable capabilities: %v", err)
		}
	}
	r, err := runner.New(cfg, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return r.Serve(ctx, func() {
		if ready != nil {
			_, _ = fmt.Fprintln(ready, "ready", r.Info().BootID)
			ready.Close()
		}
	})
}

func closeInheritedOnExec(keep int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err == nil && fd > 2 && fd != keep {
			syscall.CloseOnExec(fd)
		}
	}
}

// clearInheritableCaps empties the runner's inheritable capabilities on every
// thread. bubblewrap leaves the runner's capabilities inheritable; the
// programs it starts must hold none, not even ones they could only regain by
// executing a file with matching file capabilities.
func clearInheritableCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)),
		uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return fmt.Errorf("capset: %w", errno)
	}
	return nil
}

// networkConfig is the runner's configuration in an image run by a remote
// backend: it serves on listen with the token of ASTRABOX_RUNNER_TOKEN, listens
// on the loopback port of every forward of ASTRABOX_RUNNER_FORWARDS for the
// egress tunnel, and every other variable of environ is the box environment
// its processes get.
func networkConfig(listen string, environ []string) (runnerapi.Config, error) {
	vars := map[string]string{}
	env := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, runnerapi.EnvPrefix) {
			vars[name] = value
		} else if name != "" {
			env[name] = value
		}
	}
	cfg := runnerapi.Config{ListenTCP: listen, Token: vars[runnerapi.EnvToken], Env: env,
		Workspace: vars[runnerapi.EnvWorkspace], StateDir: vars[runnerapi.EnvStateDir]}
	if len(cfg.Token) < 16 {
		return cfg, fmt.Errorf("-listen needs a token of at least 16 characters in %s", runnerapi.EnvToken)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = runnerapi.ControlDir
	}
	if raw := vars[runnerapi.EnvForwards]; raw != "" {
		var forwards []sandbox.Forward
		if err := json.Unmarshal([]byte(raw), &forwards); err != nil {
			return cfg, fmt.Errorf("%s: %w", runnerapi.EnvForwards, err)
		}
		if err := (sandbox.Spec{Network: sandbox.NetworkPolicy{Forwards: forwards}}).WithDefaults().Validate(); err != nil {
			return cfg, fmt.Errorf("%s: %w", runnerapi.EnvForwards, err)
		}
		for _, f := range forwards {
			cfg.Tunnels = append(cfg.Tunnels, runnerapi.Tunnel{Name: f.Name, Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port))})
		}
		cfg.TunnelForwards = raw
	}
	for _, id := range []struct {
		name string
		to   *int
	}{{runnerapi.EnvProgramUID, &cfg.ProgramUID}, {runnerapi.EnvProgramGID, &cfg.ProgramGID}} {
		if v := vars[id.name]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("%s=%q is not an account id", id.name, v)
			}
			*id.to = n
		}
	}
	if cfg.Workspace != "" {
		// The program account owns its workspace, as the local backend's boxes
		// give it; an image's volume may arrive owned by root.
		if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
			return cfg, fmt.Errorf("create workspace %s: %w", cfg.Workspace, err)
		}
		if cfg.ProgramUID > 0 {
			if err := os.Chown(cfg.Workspace, cfg.ProgramUID, cfg.ProgramGID); err != nil {
				return cfg, fmt.Errorf("give workspace %s to the program account: %w", cfg.Workspace, err)
			}
		}
	}
	return cfg, nil
}
