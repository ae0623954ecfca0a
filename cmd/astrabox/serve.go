package main

import (
	"context"

	"github.com/spf13/cobra"
)

func newServeCommand() *cobra.Command {
	return servingCommand("serve", "Run the API server against an external PostgreSQL and Temporal", (*platform).runAPI)
}

func newWorkerCommand() *cobra.Command {
	return servingCommand("worker", "Run a Temporal worker against an external PostgreSQL and Temporal", (*platform).runWorker)
}

// servingCommand is a production role: it connects to the external PostgreSQL
// and Temporal, refuses a schema older than the binary, and runs part until
// the process is told to stop.
func servingCommand(use, short string, part func(*platform, context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			defer log.Sync() //nolint:errcheck // nothing useful to do when flushing logs fails
			p, err := openPlatform(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer p.close()
			if err := p.requireCurrentSchema(cmd.Context()); err != nil {
				return err
			}
			return runAll(cmd.Context(), func(ctx context.Context) error { return part(p, ctx) },
				debugServer(cfg.Debug.PprofAddr, log.Named("debug")))
		},
	}
}
