package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/astrabox/astrabox/config"
	"github.com/astrabox/astrabox/internal/temporalconn"
	"github.com/astrabox/astrabox/workflows"
)

func newTemporalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "temporal setup|set-current-version",
		Short: "Prepare a Temporal namespace for AstraBox and promote worker builds",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "setup",
			Short: "Register the Session workflows' search attributes on temporal.namespace (idempotent)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withTemporal(cmd, func(ctx context.Context, cfg *config.Config, c client.Client) error {
					got, err := temporalconn.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, workflows.SearchAttributeNames())
					if err != nil {
						return err
					}
					for _, name := range got.Added {
						fmt.Fprintf(cmd.OutOrStdout(), "added search attribute %s\n", name)
					}
					for _, name := range got.Present {
						fmt.Fprintf(cmd.OutOrStdout(), "search attribute %s already registered\n", name)
					}
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "set-current-version [build-id]",
			Short: "Make a build the current version of temporal.versioning.deployment_name (default: this binary's)",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withTemporal(cmd, func(ctx context.Context, cfg *config.Config, c client.Client) error {
					v := cfg.Temporal.Versioning
					v.Enabled = true
					if len(args) == 1 {
						v.BuildID = args[0]
					}
					version := workerVersion(v)
					if err := temporalconn.SetCurrentVersion(ctx, c, version.DeploymentName, version.BuildID); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "current version of %s is now %s\n", version.DeploymentName, version.BuildID)
					return nil
				})
			},
		},
	)
	return cmd
}

// withTemporal runs f with a Temporal client from the command's configuration.
func withTemporal(cmd *cobra.Command, f func(ctx context.Context, cfg *config.Config, c client.Client) error) error {
	cfg, log, err := loadConfig(cmd, nil)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing useful to do when flushing logs fails
	c, err := temporalconn.Dial(cmd.Context(), cfg.Temporal, log, cfg.Startup.Timeout, temporalconn.Instruments{})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
	defer cancel()
	return f(ctx, cfg, c)
}
