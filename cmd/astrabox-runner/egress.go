package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox/egress"
)

// maxForwarderConfig bounds the configuration read from stdin.
const maxForwarderConfig = 1 << 20

// forward runs on the host: it serves one box's egress sockets (package
// sandbox/egress) with the configuration and credentials read from stdin, until
// SIGTERM, then lets the requests in progress finish. The local backend starts
// it in its own session, so it outlives the worker and the model streams it
// carries survive a worker restart.
func forward(args []string) error {
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	readyFD := fs.Int("ready-fd", -1, "file descriptor to write \"ready\" to once every socket listens")
	configPath := fs.String("config", "", "read the configuration from this file instead of stdin (a Kubernetes box's egress sidecar, whose Secret is mounted only into it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	in := io.Reader(os.Stdin)
	if *configPath != "" {
		f, err := os.Open(*configPath)
		if err != nil {
			return fmt.Errorf("open egress config: %w", err)
		}
		defer f.Close()
		in = f
	}
	raw, err := io.ReadAll(io.LimitReader(in, maxForwarderConfig))
	if err != nil {
		return fmt.Errorf("read egress config: %w", err)
	}
	var cfg egress.ForwarderConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse egress config: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.BoxPID > 0 {
		if err := stopWhenExits(cfg.BoxPID, stop); err != nil {
			return err
		}
	}
	return egress.Serve(ctx, cfg, func() {
		if *readyFD < 0 {
			return
		}
		ready := os.NewFile(uintptr(*readyFD), "ready")
		_, _ = fmt.Fprintln(ready, "ready")
		ready.Close()
	})
}

// stopWhenExits calls stop once the process pid ends: a forwarder must not
// outlive its box, also when no worker is left to end it.
func stopWhenExits(pid int, stop func()) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("watch box process %d: %w", pid, err)
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		stop()
	}()
	return nil
}
