package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/astrabox/astrabox/internal/devmodel"
)

func newDevModelCommand() *cobra.Command {
	var addr string
	var slow time.Duration
	cmd := &cobra.Command{
		Use:   "devmodel",
		Short: "Run the scripted model server (Anthropic Messages, OpenAI Responses and Chat Completions) on loopback",
		Long: "Run the scripted model server that stands in for a model service on machines that reach none.\n" +
			"Replies are chosen by directives in the prompt; see docs/devmodel.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, log, err := loadConfig(cmd, map[string]any{"log.format": "console"})
			if err != nil {
				return err
			}
			defer log.Sync() //nolint:errcheck // nothing useful to do when flushing logs fails
			fmt.Fprintf(cmd.OutOrStdout(), "scripted model server on http://%s (Ctrl-C stops it)\n", addr)
			return devmodel.Run(cmd.Context(), devmodel.Options{Addr: addr, SlowDelay: slow, Logger: log.Named("devmodel")})
		},
	}
	cmd.Flags().StringVar(&addr, "addr", devmodel.DefaultAddr, "loopback host:port to listen on")
	cmd.Flags().DurationVar(&slow, "slow-delay", devmodel.DefaultSlowDelay, "pause between chunks of the slow script")
	return cmd
}

// runDevModel serves the scripted model server for `astrabox dev` when no model
// credentials are configured, so the seeded Agent works offline.
func runDevModel(port int, log *zap.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := devmodel.Run(ctx, devmodel.Options{Addr: addr, Logger: log.Named("devmodel")}); err != nil {
			return fmt.Errorf("scripted model server on %s (dev.model_port): %w", addr, err)
		}
		return nil
	}
}
