package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/astrabox/astrabox/sandbox/runnerapi"
)

// health asks the runner serving the boot configuration's socket for its info and
// succeeds once it answers: the readiness check an image declares (the
// Dockerfiles' HEALTHCHECK), run inside the box beside the runner it checks.
func health(args []string) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	configPath := fs.String("config", runnerapi.ControlDir+"/"+runnerapi.ConfigName, "boot configuration")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*configPath)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var cfg runnerapi.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse config %s: %w", *configPath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c := runnerapi.NewClient(cfg.Socket)
	if cfg.Token != "" {
		c = runnerapi.NewDialClient(func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", cfg.Socket)
		}, cfg.Token)
	}
	defer c.Close()
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("runner at %s: %w", cfg.Socket, err)
	}
	fmt.Printf("ready %s\n", info.BootID)
	return nil
}
