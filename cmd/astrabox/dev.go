package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/devstack"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/store"
)

func newDevCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run the whole platform on this machine: PostgreSQL, Temporal with its UI, the API and a worker",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfig(cmd, map[string]any{"log.format": "console"})
			if err != nil {
				return err
			}
			defer log.Sync() //nolint:errcheck // nothing useful to do when flushing logs fails
			return runDev(cmd.Context(), cfg, log)
		},
	}
}

func runDev(ctx context.Context, cfg *config.Config, log *zap.Logger) (err error) {
	stack, err := devstack.Up(ctx, cfg.Dev, log.Named("dev"))
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping the dev stack")
		err = errors.Join(err, stack.Down(context.WithoutCancel(ctx)))
	}()
	cfg.Database = stack.Database(cfg.Database)
	cfg.Temporal = stack.Temporal(cfg.Temporal)
	if !cfg.Secrets.Key.IsSet() {
		if cfg.Secrets.Key, err = devSecretsKey(stack.DataDir()); err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(stack.DataDir(), devSecretsKeyFile), err)
		}
	}
	if !cfg.Models.AnthropicAPIKey.IsSet() {
		// No model service is configured: boxes reach the scripted one, which also
		// writes automatic titles unless dev.titles is off.
		cfg.Models.AnthropicBaseURL = fmt.Sprintf("http://127.0.0.1:%d", cfg.Dev.ModelPort)
		cfg.Titles.Enabled = cfg.Titles.Enabled || cfg.Dev.Titles
	}
	if !cfg.Models.OpenAIAPIKey.IsSet() {
		// The scripted model server speaks the Responses API too.
		cfg.Models.OpenAIBaseURL = fmt.Sprintf("http://127.0.0.1:%d", cfg.Dev.ModelPort)
	}
	if !cfg.Models.GeminiAPIKey.IsSet() {
		// And the Gemini API.
		cfg.Models.GeminiBaseURL = fmt.Sprintf("http://127.0.0.1:%d", cfg.Dev.ModelPort)
	}
	installed, err := newInstalledEngines(cfg.Engines)
	if err != nil {
		return err
	}

	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	envFile := filepath.Join(stack.DataDir(), "dev.env")
	opts := devstack.SeedOptions{EnvFile: envFile, ServiceURL: cfg.HTTP.APIURL(), TemporalUIURL: cfg.Temporal.UIURL}
	for _, prog := range cfg.Engines.ACPPrograms {
		opts.ConfiguredKinds = append(opts.ConfiguredKinds, prog.Kind)
	}
	seeded, err := migrateAndSeed(ctx, st, opts)
	if err != nil {
		st.Close()
		return err
	}
	tel, err := telemetry.New(ctx, cfg.Tracing, log)
	if err != nil {
		st.Close()
		return err
	}
	tel.Metrics.WatchDatabase(st.Pool())
	tc, err := dialTemporal(ctx, cfg, log, tel)
	if err != nil {
		st.Close()
		return err
	}
	// One process: the API's /metrics serves the worker's series too.
	p := &platform{cfg: cfg, log: log, store: st, temporal: tc, engines: installed, tel: tel}
	defer p.close()

	// The dev stack owns its boxes: they are re-adopted or reaped now, and stopped
	// after the API and the worker at exit, before Temporal and PostgreSQL.
	if p.boxes, err = p.openLocalBackend(ctx); err != nil {
		return err
	}
	if p.boxes != nil {
		defer func() { err = errors.Join(err, stopBoxes(p.boxes, log.Named("dev"))) }()
		if err := reapOrphanBoxes(ctx, st, p.boxes, log.Named("dev")); err != nil {
			// What could not be destroyed now is tried again at the next start.
			log.Warn("reap boxes left by an earlier run", zap.Error(err))
		}
	}

	// The API's port is bound before the banner names it: a browser or client that
	// opens the printed URL at once waits for its first answer instead of being refused.
	apiListener, err := api.Listen(cfg.HTTP.Addr)
	if err != nil {
		return err
	}
	serveAPI := func(ctx context.Context) error { return p.serveAPI(ctx, apiListener) }
	parts := []func(context.Context) error{serveAPI, p.runWorker, debugServer(cfg.Debug.PprofAddr, log.Named("debug"))}
	if !cfg.Models.AnthropicAPIKey.IsSet() {
		parts = append(parts, runDevModel(cfg.Dev.ModelPort, log))
	}
	printBanner(cfg, envFile, seeded)
	return runAll(ctx, append(parts, func(ctx context.Context) error {
		// An occasional exit of the Temporal dev server is not fatal: the stack
		// restarts it and the API and worker reconnect. Only a server that cannot
		// be kept running ends the dev stack.
		select {
		case <-ctx.Done():
			return nil
		case <-stack.TemporalFailed():
			return stack.TemporalFailure()
		}
	})...)
}

// migrateAndSeed brings the managed database's schema up to date and makes sure
// the first user, RuntimeProfile and Agent exist.
func migrateAndSeed(ctx context.Context, st *store.Store, opts devstack.SeedOptions) (*devstack.Seeded, error) {
	if _, err := st.MigrateUp(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	seeded, err := devstack.Seed(ctx, st, opts)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return seeded, nil
}

func printBanner(cfg *config.Config, envFile string, seeded *devstack.Seeded) {
	fmt.Printf(`
AstraBox is running.

  Console      %s/  (sign in with the token: open %s/#token=%s)
  API          %s
  Temporal UI  %s
  Token        in %s (source it: SERVICE_URL, ACCESS_TOKEN, AGENT_ID)
  Agent        %s (%s)
  Model        %s

Press Ctrl-C to stop everything.

`, cfg.HTTP.APIURL(), cfg.HTTP.APIURL(), seeded.Token, cfg.HTTP.APIURL(), cfg.Temporal.UIURL, envFile, seeded.AgentName, seeded.AgentID, modelLine(cfg))
}

func modelLine(cfg *config.Config) string {
	if cfg.Models.AnthropicAPIKey.IsSet() {
		return "the configured model service"
	}
	return fmt.Sprintf("scripted model server on http://127.0.0.1:%d (no model credentials configured)", cfg.Dev.ModelPort)
}
