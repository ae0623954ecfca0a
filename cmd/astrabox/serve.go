package main

import (
	"github.com/spf13/cobra"
)

func newServeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the API server against an external PostgreSQL and Temporal",
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
			return runAll(cmd.Context(), p.runAPI)
		},
	}
}

func newWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run a Temporal worker against an external PostgreSQL and Temporal",
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
			return runAll(cmd.Context(), p.runWorker)
		},
	}
}
